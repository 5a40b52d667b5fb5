"""Check 2 of tests/gpu/run-device-checks.sh: sentence-transformers' own
CachedMultipleNegativesRankingLoss under DistributedDataParallel with NCCL
(one process, one GPU), on a small randomly initialised BERT built here:
nothing is downloaded (HF_HUB_OFFLINE=1).

  python3 gpu_st_cmnrl.py --out DIR [--backend nccl|gloo] [--steps 5] [--batch 32] [--mini-batch 8]

The model is a SentenceTransformer of two modules: a 2-layer BERT encoder
(transformers' BertModel, hidden size 64, no pooler, dropout 0) wrapped to
produce token embeddings, and sentence-transformers' mean Pooling.  The loss
gets the SentenceTransformer and then, as SentenceTransformerTrainer does
under DDP, the wrapped model as its .model, so every mini-batch backward of
every column goes through DDP.  Each run writes DIR (see gpu_common.py).
The counts come from ccshim's traces (run it under ccshim-run --torch).
"""
import argparse
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # deterministic cuBLAS
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpu_common  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn as nn  # noqa: E402

VOCAB, SEQ = 512, 16


def _import_st():
    """SentenceTransformer, Pooling and the loss, wherever this version keeps them."""
    import sentence_transformers
    from sentence_transformers import SentenceTransformer
    # 6.x's own modules first (its old paths still import, with a deprecation warning)
    try:
        from sentence_transformers.sentence_transformer.modules import Pooling
    except ImportError:
        from sentence_transformers.models import Pooling
    try:
        from sentence_transformers.sentence_transformer.losses import CachedMultipleNegativesRankingLoss
    except ImportError:
        from sentence_transformers.losses import CachedMultipleNegativesRankingLoss
    return sentence_transformers.__version__, SentenceTransformer, Pooling, CachedMultipleNegativesRankingLoss


class TinyBertEncoder(nn.Module):
    """token ids -> token embeddings, as sentence-transformers' Transformer
    module does, from a randomly initialised BERT (no files, no download)."""

    def __init__(self):
        super().__init__()
        from transformers import BertConfig, BertModel
        cfg = BertConfig(vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                         intermediate_size=128, max_position_embeddings=SEQ * 2, hidden_dropout_prob=0.0,
                         attention_probs_dropout_prob=0.0)
        cfg._attn_implementation = "eager"  # deterministic backward
        self.bert = BertModel(cfg, add_pooling_layer=False)

    def get_sentence_embedding_dimension(self):
        return 64

    def forward(self, features):
        out = self.bert(input_ids=features["input_ids"], attention_mask=features["attention_mask"])
        features["token_embeddings"] = out.last_hidden_state
        return features


def batch(gen, n, device):
    ids = torch.randint(5, VOCAB, (n, SEQ), generator=gen)
    lengths = torch.randint(4, SEQ + 1, (n,), generator=gen)
    mask = (torch.arange(SEQ)[None, :] < lengths[:, None]).long()
    return {"input_ids": (ids * mask).to(device), "attention_mask": mask.to(device)}


def flat_bytes(tensors):
    return torch.cat([t.detach().reshape(-1).float().cpu() for t in tensors]).numpy().tobytes()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--backend", choices=["nccl", "gloo"], default="nccl")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--mini-batch", type=int, default=8)
    ap.add_argument("--port", type=int, default=29512)
    a = ap.parse_args()
    st_version, SentenceTransformer, Pooling, CMNRL = _import_st()
    torch.use_deterministic_algorithms(True, warn_only=True)
    if a.backend == "nccl":
        torch.cuda.set_device(0)
        device = torch.device("cuda", 0)
    else:
        device = torch.device("cpu")
    dist.init_process_group(a.backend, rank=0, world_size=1, init_method="tcp://127.0.0.1:%d" % a.port)
    torch.manual_seed(1)
    st = SentenceTransformer(modules=[TinyBertEncoder(), Pooling(64, pooling_mode="mean")], device=str(device))
    loss_fn = CMNRL(st, mini_batch_size=a.mini_batch)
    ddp = nn.parallel.DistributedDataParallel(st, device_ids=[0] if a.backend == "nccl" else None)
    loss_fn.model = ddp  # what SentenceTransformerTrainer does with a wrapped model
    params = [p for p in st.parameters() if p.requires_grad]
    opt = torch.optim.SGD(params, lr=0.01)
    gen = torch.Generator().manual_seed(11)
    losses, grads = [], []
    for _ in range(a.steps):
        feats = [batch(gen, a.batch, device), batch(gen, a.batch, device)]  # anchor, positive
        opt.zero_grad()
        loss = loss_fn(feats, None)
        loss.backward()  # the cached loss re-embeds and back-propagates mini-batch by mini-batch
        grads.append(flat_bytes([p.grad for p in params]))
        losses.append(float(loss.detach()))
        opt.step()  # ccshim-run --torch marks the step here
    if a.backend == "nccl":
        torch.cuda.synchronize()
    per_bucket = 2 * -(-a.batch // a.mini_batch)
    import transformers
    meta = {"check": "st-cmnrl", "backend": a.backend, "steps": a.steps, "batch": a.batch,
            "mini_batch": a.mini_batch, "columns": 2, "reductions_per_bucket_per_step": per_bucket,
            "params": sum(p.numel() for p in params), "losses": losses, "torch": torch.__version__,
            "sentence_transformers": st_version, "transformers": transformers.__version__,
            "nccl": gpu_common.nccl_version(torch) if a.backend == "nccl" else None}
    gpu_common.save_run(a.out, meta, grads, flat_bytes(params))
    dist.destroy_process_group()
    print("st-cmnrl %s (sentence-transformers %s): losses %s" % (a.backend, st_version,
                                                                  " ".join("%.6f" % x for x in losses)))


if __name__ == "__main__":
    main()
