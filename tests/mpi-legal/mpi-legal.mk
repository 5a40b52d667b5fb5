# tests/mpi-legal/mpi-legal.mk - a corpus of correct MPI programs
# (tests/mpi-legal/legal.c) run under CCSHIM_ON_DESYNC=abort on 2 to 5
# ranks: no verdict, exit 0, the same results as a plain run; and
# communicator churn at a high rate (tests/mpi-legal/churn.c: 40 x (dup,
# 600 x (allgather + barrier), free)) on 3 and 5 ranks, likewise.
MPI_LEGAL_SHELL_TESTS = tests/mpi-legal/mpi-legal.sh tests/mpi-legal/churn.sh
dist_check_SCRIPTS += $(MPI_LEGAL_SHELL_TESTS)
TESTS += $(MPI_LEGAL_SHELL_TESTS)
# The same churn beside two busy loops: make check-timing (Makefile.am); in
# make check the script skips itself.
dist_check_SCRIPTS += tests/mpi-legal/churn-load.sh
TIMING_TESTS += tests/mpi-legal/churn-load.sh
TESTS += tests/mpi-legal/churn-load.sh

if HAVE_MPI
check_PROGRAMS += tests/mpi-legal/legal
tests_mpi_legal_legal_SOURCES = tests/mpi-legal/legal.c
tests_mpi_legal_legal_CPPFLAGS = $(MPI_CFLAGS)
tests_mpi_legal_legal_LDADD = $(MPI_LIBS) -lpthread
check_PROGRAMS += tests/mpi-legal/churn
tests_mpi_legal_churn_SOURCES = tests/mpi-legal/churn.c
tests_mpi_legal_churn_CPPFLAGS = $(MPI_CFLAGS)
tests_mpi_legal_churn_LDADD = $(MPI_LIBS)
endif
