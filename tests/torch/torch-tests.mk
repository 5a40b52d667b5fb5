# tests/torch/torch-tests.mk - coalescing on real PyTorch DDP (CPU, Debian's
# python3-torch and python3-mpi4py for /usr/bin/python3; skipped where they
# are not installed).  tests/torch/ddp_job.py is the job; bench/torch-bench.sh
# times it.
TORCH_TESTS = tests/torch/ddp-auto.sh tests/torch/ddp-repair.sh tests/torch/ddp-desync.sh tests/torch/ddp-skip.sh \
	tests/torch/gloo-uncovered.sh tests/torch/gloo-blocked.sh tests/torch/ddp-unused-once.sh \
	tests/torch/ddp-warning.sh tests/torch/gloo-calls.sh tests/torch/gloo-audit.sh
TESTS += $(TORCH_TESTS)
dist_check_SCRIPTS += $(TORCH_TESTS)
EXTRA_DIST += tests/torch/lib.sh tests/torch/ddp_job.py tests/torch/foreign_job.py tests/torch/warn_job.py \
	tests/torch/gloo_group.py tests/torch/gloo_calls_job.py
