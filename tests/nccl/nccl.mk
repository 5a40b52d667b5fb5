# tests/nccl/nccl.mk - NCCL interception tests (docs/nccl.md).
#
# tests/nccl/libnccl.so.2 is a test-only NCCL over host memory between
# processes (fake_nccl*.c), built against the real nccl.h; nccl_pattern runs
# a known pattern of calls on it, with and without libccshim preloaded.
# nccl_real links the real libnccl (error paths on a machine without a GPU);
# nccl_absent checks that the shim never loads NCCL or CUDA by itself.

NCCL_TESTS = tests/nccl/nccl-pattern.sh tests/nccl/nccl-absent.sh tests/nccl/nccl-real.sh \
	tests/nccl/nccl-completion.sh
TESTS += $(NCCL_TESTS)
dist_check_SCRIPTS += $(NCCL_TESTS)
EXTRA_DIST += tests/nccl/lib.sh
# The hang's latency targets: make check-timing (Makefile.am); in
# make check the script skips itself.
dist_check_SCRIPTS += tests/nccl/nccl-timing.sh
TIMING_TESTS += tests/nccl/nccl-timing.sh
TESTS += tests/nccl/nccl-timing.sh
EXTRA_DIST += tests/nccl/fake_nccl.h tests/nccl/fake_nccl.c tests/nccl/fake_nccl_shm.c
EXTRA_DIST += tests/cuda/fake_cuda.h tests/cuda/fake_cuda.c
CLEANFILES += tests/nccl/libnccl.so.2 tests/cuda/libcuda.so.1

if HAVE_NCCL
FAKE_NCCL_SRC = $(srcdir)/tests/nccl/fake_nccl.c $(srcdir)/tests/nccl/fake_nccl_shm.c
# A plain rule, not libtool: the file must be exactly libnccl.so.2 with that
# soname, so programs linked to it look like programs linked to NCCL.
tests/nccl/libnccl.so.2: $(FAKE_NCCL_SRC) $(srcdir)/tests/nccl/fake_nccl.h
	@$(MKDIR_P) tests/nccl
	$(AM_V_CCLD)$(CC) $(CCS_CFLAGS) $(NCCL_CFLAGS) $(CFLAGS) -fPIC -shared -Wl,-soname,libnccl.so.2 \
	  -o $@ $(FAKE_NCCL_SRC) -lrt -ldl -pthread

# The test-only CUDA driver (tests/cuda/fake_cuda.h): loaded by the test
# NCCL in its asynchronous mode (FAKENCCL_ASYNC=1), never by ccshim.
tests/cuda/libcuda.so.1: $(srcdir)/tests/cuda/fake_cuda.c $(srcdir)/tests/cuda/fake_cuda.h
	@$(MKDIR_P) tests/cuda
	$(AM_V_CCLD)$(CC) $(CCS_CFLAGS) $(CUDA_CFLAGS) $(CFLAGS) -fPIC -shared -Wl,-soname,libcuda.so.1 \
	  -o $@ $(srcdir)/tests/cuda/fake_cuda.c -pthread
check_DATA = tests/nccl/libnccl.so.2 tests/cuda/libcuda.so.1

check_PROGRAMS += tests/nccl/nccl_pattern tests/nccl/nccl_absent tests/nccl/nccl_track
# Completion tracking scenarios (tests/nccl/nccl-completion.sh): links the
# test NCCL, loads the test CUDA driver at run time.
tests_nccl_nccl_track_SOURCES = tests/nccl/nccl_track.c
tests_nccl_nccl_track_CPPFLAGS = $(AM_CPPFLAGS) $(NCCL_CFLAGS)
tests_nccl_nccl_track_LDADD = -L$(top_builddir)/tests/nccl -l:libnccl.so.2 -ldl
tests_nccl_nccl_track_LDFLAGS = -Wl,-rpath,$(abs_top_builddir)/tests/nccl
tests_nccl_nccl_track_DEPENDENCIES = tests/nccl/libnccl.so.2 tests/cuda/libcuda.so.1
tests_nccl_nccl_pattern_SOURCES = tests/nccl/nccl_pattern.c
tests_nccl_nccl_pattern_CPPFLAGS = $(AM_CPPFLAGS) $(NCCL_CFLAGS)
tests_nccl_nccl_pattern_LDADD = -L$(top_builddir)/tests/nccl -l:libnccl.so.2
tests_nccl_nccl_pattern_LDFLAGS = -Wl,-rpath,$(abs_top_builddir)/tests/nccl
tests_nccl_nccl_pattern_DEPENDENCIES = tests/nccl/libnccl.so.2


# Uses nccl.h for its types only: links no NCCL.
tests_nccl_nccl_absent_SOURCES = tests/nccl/nccl_absent.c
tests_nccl_nccl_absent_CPPFLAGS = $(AM_CPPFLAGS) $(NCCL_CFLAGS)
tests_nccl_nccl_absent_LDADD = -ldl

if HAVE_CHECK
check_PROGRAMS += tests/nccl/test_nccl_redop
TESTS += tests/nccl/test_nccl_redop
tests_nccl_test_nccl_redop_SOURCES = tests/nccl/test_nccl_redop.c
tests_nccl_test_nccl_redop_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/tests/unit $(CHECK_CFLAGS)
tests_nccl_test_nccl_redop_LDADD = libccsparts.la $(CHECK_LIBS) -lpthread
endif
endif

if HAVE_LIBNCCL
check_PROGRAMS += tests/nccl/nccl_real
tests_nccl_nccl_real_SOURCES = tests/nccl/nccl_real.c
tests_nccl_nccl_real_CPPFLAGS = $(AM_CPPFLAGS) $(NCCL_CFLAGS)
tests_nccl_nccl_real_LDADD = $(NCCL_LIBS)
endif
