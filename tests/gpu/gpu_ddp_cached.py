"""Check 1 of tests/gpu/run-device-checks.sh: the first source document's
reproduction (a cached loss under DistributedDataParallel, one process),
with the NCCL backend on one GPU instead of gloo.

  python3 gpu_ddp_cached.py --out DIR [--backend nccl|gloo] [--mode per-minibatch|no-sync]
                            [--impl auto|st|local] [--steps 5] [--batch 16] [--mini-batch 4]

--mode per-minibatch: the loss runs as it is, so every mini-batch backward of
  every column makes DDP all-reduce its buckets (the report's bug: 8 per step
  for batch 16, mini-batch 4, 2 columns).
--mode no-sync: the reference; every backward but the last of the step runs
  its forward under DDP's no_sync(), so DDP reduces once per step.
--impl st: sentence-transformers' CachedLossMixin, as in the report; local:
  the same cached-gradient procedure written here (for machines without
  sentence-transformers); auto: st when importable.

The counts come from ccshim's traces (run it under `ccshim-run --torch
--trace-dir`); this script only trains and writes DIR (see gpu_common.py):
the loss per step, the gradient after each step's backward passes and the
final parameters.  The model is bigger than the report's Linear(4, 4) so its
gradient bucket (4224 bytes) is above CCSHIM_COALESCE_MIN_BYTES.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpu_common  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402


class TinyModel(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.linear = nn.Linear(dim, dim)

    def forward(self, features):
        return {"sentence_embedding": self.linear(features["input_ids"])}


class NoSyncButLast(nn.Module):
    """Runs every forward with gradients but the last of a step under DDP's
    no_sync(): the fix the report proposes, as the reference."""

    def __init__(self, ddp, per_step):
        super().__init__()
        self.ddp = ddp
        self.per_step = per_step
        self.seen = 0

    def forward(self, features):
        if torch.is_grad_enabled():
            self.seen += 1
            if self.seen % self.per_step:
                with self.ddp.no_sync():
                    return self.ddp(features)
        return self.ddp(features)


def _loss_value(reps, device):
    anchors, positives = torch.cat(reps[0]), torch.cat(reps[1])
    return F.cross_entropy(anchors @ positives.T, torch.arange(anchors.size(0), device=device))


def make_st_loss(model, mini_batch_size, device):
    """The report's TinyCachedLoss over sentence-transformers' CachedLossMixin."""
    from sentence_transformers.base.losses.gradcache import CachedLossMixin

    class TinyCachedLoss(nn.Module, CachedLossMixin):
        def __init__(self, model, mini_batch_size):
            super().__init__()
            self.model = model
            self.mini_batch_size = mini_batch_size

        def calculate_loss(self, reps, labels=None, *, with_backward=False):
            loss = _loss_value(reps, device)
            if with_backward:
                loss.backward()
            return loss.detach()

        def forward(self, sentence_features, labels=None):
            return self.forward_cached(sentence_features, labels)

    return TinyCachedLoss(model, mini_batch_size)


class LocalCachedLoss:
    """The same procedure without sentence-transformers: embed every
    mini-batch without gradients, take the loss's gradient with respect to
    the embeddings, then re-embed mini-batch by mini-batch, column by
    column, and back-propagate the cached gradient (one backward each)."""

    def __init__(self, model, mini_batch_size, device):
        self.model, self.m, self.device = model, mini_batch_size, device

    def _split(self, feats):
        n = feats["input_ids"].size(0)
        return [{k: v[i:i + self.m] for k, v in feats.items()} for i in range(0, n, self.m)]

    def step(self, sentence_features):
        with torch.no_grad():
            reps = [[self.model(mb)["sentence_embedding"] for mb in self._split(f)] for f in sentence_features]
        reps = [[r.detach().requires_grad_() for r in col] for col in reps]
        loss = _loss_value(reps, self.device)
        loss.backward()
        for f, col in zip(sentence_features, reps):
            for mb, r in zip(self._split(f), col):
                emb = self.model(mb)["sentence_embedding"]
                (emb * r.grad).sum().backward()
        return loss.detach()


def flat_bytes(tensors):
    return torch.cat([t.detach().reshape(-1).float().cpu() for t in tensors]).numpy().tobytes()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--backend", choices=["nccl", "gloo"], default="nccl")
    ap.add_argument("--mode", choices=["per-minibatch", "no-sync"], default="per-minibatch")
    ap.add_argument("--impl", choices=["auto", "st", "local"], default="auto")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--mini-batch", type=int, default=4)
    ap.add_argument("--dim", type=int, default=32)
    ap.add_argument("--port", type=int, default=29511)
    a = ap.parse_args()

    impl = a.impl
    if impl == "auto":
        try:
            import sentence_transformers.base.losses.gradcache  # noqa: F401
            impl = "st"
        except ImportError:
            impl = "local"
    if a.backend == "nccl":
        torch.cuda.set_device(0)
        device = torch.device("cuda", 0)
    else:
        device = torch.device("cpu")
    torch.manual_seed(1)
    dist.init_process_group(a.backend, rank=0, world_size=1, init_method="tcp://127.0.0.1:%d" % a.port)
    model = TinyModel(a.dim).to(device)
    ddp = nn.parallel.DistributedDataParallel(model, device_ids=[0] if a.backend == "nccl" else None)
    per_step = 2 * -(-a.batch // a.mini_batch)
    front = NoSyncButLast(ddp, per_step) if a.mode == "no-sync" else ddp
    if impl == "st":
        loss_fn = make_st_loss(front, a.mini_batch, device)
        run = lambda feats: loss_fn(feats)  # noqa: E731
    else:
        local = LocalCachedLoss(front, a.mini_batch, device)
        run = local.step
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    data = torch.Generator().manual_seed(7)
    losses, grads = [], []
    for _ in range(a.steps):
        feats = [{"input_ids": torch.randn(a.batch, a.dim, generator=data).to(device)} for _ in range(2)]
        opt.zero_grad()
        loss = run(feats)
        if impl == "st":
            loss.backward()
        grads.append(flat_bytes([p.grad for p in model.parameters()]))
        losses.append(float(loss))
        opt.step()  # ccshim-run --torch marks the step here
    if a.backend == "nccl":
        torch.cuda.synchronize()
    meta = {"check": "ddp-cached", "backend": a.backend, "mode": a.mode, "impl": impl, "steps": a.steps,
            "batch": a.batch, "mini_batch": a.mini_batch, "columns": 2, "reductions_per_step": per_step,
            "params": sum(p.numel() for p in model.parameters()), "losses": losses,
            "torch": torch.__version__,
            "nccl": gpu_common.nccl_version(torch) if a.backend == "nccl" else None}
    gpu_common.save_run(a.out, meta, grads, flat_bytes(model.parameters()))
    dist.destroy_process_group()
    print("ddp-cached %s %s %s: losses %s" % (a.backend, a.mode, impl, " ".join("%.6f" % x for x in losses)))


if __name__ == "__main__":
    main()
