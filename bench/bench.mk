# bench/bench.mk - `make bench`: each script in bench_list, in order.
# First the whole-process ratios (docs/performance.md "job"), then the details.
bench_list += bench/job-bench.sh
EXTRA_DIST += bench/job-bench.sh bench/wrapper_probe.c
bench_list += bench/overhead.sh
EXTRA_DIST += bench/overhead.sh bench/lib.sh
if HAVE_MPI
check_PROGRAMS += bench/mpi_loop bench/hotpath
bench_mpi_loop_SOURCES = bench/mpi_loop.c
bench_mpi_loop_CPPFLAGS = $(AM_CPPFLAGS) $(MPI_CFLAGS)
bench_mpi_loop_LDADD = $(MPI_LIBS)
bench_hotpath_SOURCES = bench/hotpath.c
bench_hotpath_CFLAGS = $(AM_CFLAGS) -O2
bench_hotpath_LDADD = libccsparts.la -lpthread
endif

# NCCL completion tracking (docs/performance.md "nccl-track"): the wrapper's
# cost with tracking on and off, on the test CUDA driver.
if HAVE_NCCL
bench_list += bench/nccl-track-bench.sh
check_PROGRAMS += bench/ncclhot
bench_ncclhot_SOURCES = bench/ncclhot.c
bench_ncclhot_CPPFLAGS = $(AM_CPPFLAGS) $(NCCL_CFLAGS)
bench_ncclhot_CFLAGS = $(AM_CFLAGS) -O2
bench_ncclhot_LDADD = libccsparts.la -ldl -lpthread
# Instructions per intercepted ncclAllReduce (callgrind), on the test NCCL.
check_PROGRAMS += bench/nccl_loop
bench_nccl_loop_SOURCES = bench/nccl_loop.c
bench_nccl_loop_CPPFLAGS = $(AM_CPPFLAGS) $(NCCL_CFLAGS)
bench_nccl_loop_LDADD = -L$(top_builddir)/tests/nccl -l:libnccl.so.2
bench_nccl_loop_LDFLAGS = -Wl,-rpath,$(abs_top_builddir)/tests/nccl
bench_nccl_loop_DEPENDENCIES = tests/nccl/libnccl.so.2
endif
EXTRA_DIST += bench/nccl-track-bench.sh
bench_list += bench/torch-bench.sh
EXTRA_DIST += bench/torch-bench.sh bench/ddpsync_forward.py
bench_list += bench/ddp-heap-bench.sh
EXTRA_DIST += bench/ddp-heap-bench.sh
bench_list += bench/torch2-report-bench.sh
EXTRA_DIST += bench/torch2-report-bench.sh
