# tests/coalesce/coalesce-tests.mk - coalescing (docs/coalescing.md).
#
# test_coalesce: Check suite of the pure logic (policy parsing, identity
# table and decisions, the local answer's arithmetic, 16-bit conversions).
# coal_ddp: a small MPI job with DDP-style buckets (tests/coalesce/coal_ddp.c).
# The shell tests run it, the reference trainer and the NCCL trainer over the
# test-only host NCCL under ccshim-run with CCSHIM_COALESCE set.
include tools/python/python.mk
COALESCE_TESTS = tests/coalesce/coalesce-mpi.sh tests/coalesce/coalesce-trainer.sh tests/coalesce/coalesce-desync.sh \
	tests/coalesce/coalesce-nccl.sh tests/coalesce/coalesce-torch.sh
TESTS += $(COALESCE_TESTS)
dist_check_SCRIPTS += $(COALESCE_TESTS)
EXTRA_DIST += tests/coalesce/fake_torch tests/coalesce/torch_job.py
bench_list += bench/coalesce-bench.sh
EXTRA_DIST += bench/coalesce-bench.sh

if HAVE_CHECK
check_PROGRAMS += tests/coalesce/test_coalesce
TESTS += tests/coalesce/test_coalesce
tests_coalesce_test_coalesce_SOURCES = tests/coalesce/test_coalesce.c
tests_coalesce_test_coalesce_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/tests/unit $(CHECK_CFLAGS)
tests_coalesce_test_coalesce_LDADD = libccsparts.la $(CHECK_LIBS) -lpthread
endif

if HAVE_MPI
check_PROGRAMS += tests/coalesce/coal_ddp
tests_coalesce_coal_ddp_SOURCES = tests/coalesce/coal_ddp.c
tests_coalesce_coal_ddp_CPPFLAGS = $(AM_CPPFLAGS) $(MPI_CFLAGS)
tests_coalesce_coal_ddp_LDADD = $(MPI_LIBS) -lm
endif

if HAVE_NCCL
# Linked to the test-only host NCCL (tests/nccl/nccl.mk builds it).
check_PROGRAMS += tests/coalesce/coal_nccl
tests_coalesce_coal_nccl_SOURCES = tests/coalesce/coal_nccl.c
tests_coalesce_coal_nccl_CPPFLAGS = $(AM_CPPFLAGS) $(NCCL_CFLAGS)
tests_coalesce_coal_nccl_LDADD = -L$(top_builddir)/tests/nccl -l:libnccl.so.2 -lm
tests_coalesce_coal_nccl_LDFLAGS = -Wl,-rpath,$(abs_top_builddir)/tests/nccl
tests_coalesce_coal_nccl_DEPENDENCIES = tests/nccl/libnccl.so.2
endif
