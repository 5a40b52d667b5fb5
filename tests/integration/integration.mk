# tests/integration/integration.mk - real MPI programs under the preload.
INTEGRATION_TESTS = tests/integration/symbols.sh tests/integration/mpi-pattern.sh tests/integration/lifecycle.sh tests/integration/ccshim-run.sh \
	tests/integration/hygiene.sh
INTEGRATION_TESTS += tests/integration/mpi-every-call.sh tests/integration/private-files.sh
# LAMMPS and HPCC from Debian (lammps, hpcc), unmodified.
INTEGRATION_TESTS += tests/integration/mpi-apps.sh
EXTRA_DIST += tests/integration/apps/in.lj tests/integration/apps/hpccinf.txt
TESTS += $(INTEGRATION_TESTS)
dist_check_SCRIPTS += $(INTEGRATION_TESTS)
EXTRA_DIST += tests/integration/symbols-api.txt tests/integration/symbols-mpi.txt tests/integration/symbols-mpi4.txt tests/integration/symbols-nccl.txt
check_PROGRAMS += tests/integration/lifecycle
tests_integration_lifecycle_SOURCES = tests/integration/lifecycle.c
if HAVE_MPI
check_PROGRAMS += tests/integration/mpi_pattern
tests_integration_mpi_pattern_SOURCES = tests/integration/mpi_pattern.c
tests_integration_mpi_pattern_CPPFLAGS = $(AM_CPPFLAGS) $(MPI_CFLAGS)
tests_integration_mpi_pattern_LDADD = $(MPI_LIBS)
check_PROGRAMS += tests/integration/mpi_every_call
tests_integration_mpi_every_call_SOURCES = tests/integration/mpi_every_call.c
tests_integration_mpi_every_call_CPPFLAGS = $(AM_CPPFLAGS) $(MPI_CFLAGS)
tests_integration_mpi_every_call_LDADD = $(MPI_LIBS)
check_PROGRAMS += tests/integration/mpi_crash
tests_integration_mpi_crash_SOURCES = tests/integration/mpi_crash.c
tests_integration_mpi_crash_CPPFLAGS = $(AM_CPPFLAGS) $(MPI_CFLAGS)
tests_integration_mpi_crash_LDADD = $(MPI_LIBS)
endif
