# tests/memcheck/memcheck.mk - the legal corpus (tests/mpi-legal, the
# every-call program, tests/mpi-inter) under valgrind memcheck: no error
# whose innermost ccshim frame is ccshim's own code (vg_ccshim.py; Open
# MPI's own reports in openmpi.supp).
MEMCHECK_SHELL_TESTS = tests/memcheck/memcheck.sh
dist_check_SCRIPTS += $(MEMCHECK_SHELL_TESTS)
TESTS += $(MEMCHECK_SHELL_TESTS)
EXTRA_DIST += tests/memcheck/vg_ccshim.py tests/memcheck/openmpi.supp \
	tests/memcheck/fixtures/ccshim-over-read.xml tests/memcheck/fixtures/openmpi-own.xml
