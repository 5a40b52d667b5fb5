# tests/desync/desync-tests.mk - desync detection (docs/desync.md): unit
# tests of the rules and the protocol, MPI scenarios under ccshim-run, the
# TCP side channel, the scale simulation and the bench (the fuzz targets of
# the side channel are in tests/fuzz).
EXTRA_DIST += tests/desync/lib.sh tests/desync/netns.sh tests/desync/netns-exec.sh \
	tests/desync/flood.py tests/desync/faultproxy.py tests/desync/container-rank.sh
DESYNC_SHELL_TESTS = tests/desync/desync-twohost.sh tests/desync/desync-mpi.sh tests/desync/desync-healthy.sh tests/desync/desync-tcp.sh \
	tests/desync/desync-security.sh tests/desync/desync-netfault.sh tests/desync/desync-admission.sh \
	tests/desync/desync-trainer.sh tests/desync/desync-portsquat.sh tests/desync/desync-leftovers.sh \
	tests/desync/desync-sim.sh tests/desync/desync-tree.sh \
	tests/desync/desync-nccl.sh tests/desync/desync-containers.sh
dist_check_SCRIPTS += $(DESYNC_SHELL_TESTS)
TESTS += $(DESYNC_SHELL_TESTS)
# Latency targets: make check-timing (Makefile.am); in
# make check the script skips itself.
dist_check_SCRIPTS += tests/desync/desync-timing.sh
TIMING_TESTS += tests/desync/desync-timing.sh
TESTS += tests/desync/desync-timing.sh

if HAVE_MPI
check_PROGRAMS += tests/desync/desync_scenario
tests_desync_desync_scenario_SOURCES = tests/desync/desync_scenario.c
tests_desync_desync_scenario_CPPFLAGS = $(MPI_CFLAGS)
tests_desync_desync_scenario_LDADD = $(MPI_LIBS)
endif

if HAVE_CHECK
check_PROGRAMS += tests/desync/test_rules
TESTS += tests/desync/test_rules
tests_desync_test_rules_SOURCES = tests/desync/test_rules.c
tests_desync_test_rules_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/tests/unit $(CHECK_CFLAGS)
tests_desync_test_rules_LDADD = libccsparts.la $(CHECK_LIBS) -lpthread
endif

if HAVE_CHECK
check_PROGRAMS += tests/desync/test_tcp
TESTS += tests/desync/test_tcp
tests_desync_test_tcp_SOURCES = tests/desync/test_tcp.c
tests_desync_test_tcp_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/tests/unit $(CHECK_CFLAGS)
tests_desync_test_tcp_LDADD = libccsparts.la $(CHECK_LIBS) -lpthread
endif

# The scale simulation (bench/desync-bench.sh runs it at 64, 1024, 4096 ranks).
check_PROGRAMS += tests/desync/desync_sim
tests_desync_desync_sim_SOURCES = tests/desync/desync_sim.c
tests_desync_desync_sim_LDADD = libccsparts.la -lpthread

bench_list += bench/desync-bench.sh
EXTRA_DIST += bench/desync-bench.sh

if HAVE_CHECK
check_PROGRAMS += tests/desync/test_agree
TESTS += tests/desync/test_agree
tests_desync_test_agree_SOURCES = tests/desync/test_agree.c
tests_desync_test_agree_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/tests/unit $(CHECK_CFLAGS)
tests_desync_test_agree_LDADD = libccsparts.la $(CHECK_LIBS) -lpthread
endif

# The tree's fold (docs/desync.md, "The tree").
if HAVE_CHECK
check_PROGRAMS += tests/desync/test_agg
TESTS += tests/desync/test_agg
tests_desync_test_agg_SOURCES = tests/desync/test_agg.c
tests_desync_test_agg_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/tests/unit $(CHECK_CFLAGS)
tests_desync_test_agg_LDADD = libccsparts.la $(CHECK_LIBS) -lpthread
endif
