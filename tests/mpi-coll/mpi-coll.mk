# tests/mpi-coll/mpi-coll.mk - the neighbourhood collectives, the
# communicator constructors and, where the MPI has them, MPI-4's persistent
# and large-count collectives (tests/mpi-coll/coll.c): a legal program
# under CCSHIM_ON_DESYNC=abort with a plain run's results and no verdict;
# a neighbourhood and a persistent mismatch named with the rank and seq.
MPI_COLL_SHELL_TESTS = tests/mpi-coll/mpi-coll.sh
dist_check_SCRIPTS += $(MPI_COLL_SHELL_TESTS)
TESTS += $(MPI_COLL_SHELL_TESTS)

if HAVE_MPI
check_PROGRAMS += tests/mpi-coll/coll
tests_mpi_coll_coll_SOURCES = tests/mpi-coll/coll.c
tests_mpi_coll_coll_CPPFLAGS = $(AM_CPPFLAGS) $(MPI_CFLAGS)
tests_mpi_coll_coll_LDADD = $(MPI_LIBS)
endif
