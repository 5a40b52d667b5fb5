# tests/mpi-inter/mpi-inter.mk - every collective on intercommunicators of
# 3+2, 2+3 and 1+4 ranks (tests/mpi-inter/inter.c), plain and under
# CCSHIM_ON_DESYNC=abort: the same results, no verdict, the records the
# rules give (per-peer arrays read with the remote group's size).
MPI_INTER_SHELL_TESTS = tests/mpi-inter/mpi-inter.sh
dist_check_SCRIPTS += $(MPI_INTER_SHELL_TESTS)
TESTS += $(MPI_INTER_SHELL_TESTS)

if HAVE_MPI
check_PROGRAMS += tests/mpi-inter/inter
tests_mpi_inter_inter_SOURCES = tests/mpi-inter/inter.c
tests_mpi_inter_inter_CPPFLAGS = $(MPI_CFLAGS)
tests_mpi_inter_inter_LDADD = $(MPI_LIBS)
endif
