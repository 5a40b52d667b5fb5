# tests/pysites/pysites.mk - Python call sites (docs/python-sites.md): real
# PyTorch DDP under `ccshim-run --torch`, mpi4py under `--python` (skipped
# without Debian's python3-torch and python3-mpi4py for /usr/bin/python3).
PYSITES_TESTS = tests/pysites/pysites-ddp.sh tests/pysites/pysites-mpi4py.sh
TESTS += $(PYSITES_TESTS)
dist_check_SCRIPTS += $(PYSITES_TESTS)
EXTRA_DIST += tests/pysites/pysites_job.py tests/pysites/mpi4py_job.py
bench_list += bench/pysite-bench.sh
EXTRA_DIST += bench/pysite-bench.sh bench/pysite_call.py
check_PROGRAMS += bench/pysite_hotpath
bench_pysite_hotpath_SOURCES = bench/pysite_hotpath.c
bench_pysite_hotpath_CFLAGS = $(AM_CFLAGS) -O2
bench_pysite_hotpath_LDADD = libccsparts.la -lpthread
