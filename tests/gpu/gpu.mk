# tests/gpu/gpu.mk - real-GPU validation (docs/gpu-validation.md).
#
# The checks themselves run on a machine with one CUDA GPU and PyTorch
# (tests/gpu/run-device-checks.sh, prepared here by tests/gpu/build-carry.sh).
# `make check` runs only gpu-dry-run.sh: the scripts' syntax, and every part
# of the device script that needs no GPU, over the test-only host NCCL.
#
# nccl_bench and gpu_stuck link "libnccl.so.2" by soname (the test-only one
# at build time) and the CUDA driver through dlopen, so on the GPU machine
# they run with whichever NCCL LD_LIBRARY_PATH names (PyTorch's).
GPU_CHECK_FILES = tests/gpu/build-carry.sh tests/gpu/run-device-checks.sh tests/gpu/make-expected.sh
EXTRA_DIST += $(GPU_CHECK_FILES) tests/gpu/gpu_cuda.h tests/gpu/gpu_ddp_cached.py tests/gpu/gpu_st_cmnrl.py \
	tests/gpu/gpu_common.py tests/gpu/gpu_graph.py
TESTS += tests/gpu/gpu-dry-run.sh
dist_check_SCRIPTS += tests/gpu/gpu-dry-run.sh

if HAVE_NCCL
check_PROGRAMS += tests/gpu/nccl_bench tests/gpu/gpu_stuck
tests_gpu_nccl_bench_SOURCES = tests/gpu/nccl_bench.c
tests_gpu_nccl_bench_CPPFLAGS = $(AM_CPPFLAGS) $(NCCL_CFLAGS)
tests_gpu_nccl_bench_LDADD = -L$(top_builddir)/tests/nccl -l:libnccl.so.2 -ldl
tests_gpu_nccl_bench_DEPENDENCIES = tests/nccl/libnccl.so.2
tests_gpu_gpu_stuck_SOURCES = tests/gpu/gpu_stuck.c
tests_gpu_gpu_stuck_CPPFLAGS = $(AM_CPPFLAGS) $(NCCL_CFLAGS)
tests_gpu_gpu_stuck_LDADD = -L$(top_builddir)/tests/nccl -l:libnccl.so.2 -ldl -lpthread
tests_gpu_gpu_stuck_DEPENDENCIES = tests/nccl/libnccl.so.2
endif
