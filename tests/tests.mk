# tests/tests.mk - test suites; each area keeps its own fragment.
EXTRA_DIST += tests/tap.sh tests/test_clock.h tests/test_ports.h tests/mpi_check.h
# Prints what a trace holds, field by field, for the tests' awk checks.
check_PROGRAMS += tests/ccs_trace_dump
tests_ccs_trace_dump_SOURCES = tests/ccs_trace_dump.c
tests_ccs_trace_dump_LDADD = libccstrace.la
include tests/unit/unit.mk
include tests/integration/integration.mk
include tests/nccl/nccl.mk
include tests/trainer/trainer-tests.mk
include tests/audit/audit-tests.mk
include tests/desync/desync-tests.mk
include tests/coalesce/coalesce-tests.mk
include tests/torch/torch-tests.mk
include tests/gpu/gpu.mk
include tests/mpi-legal/mpi-legal.mk
include tests/mpi-inter/mpi-inter.mk
include tests/mpi-coll/mpi-coll.mk
include tests/peers/peers.mk
include tests/memcheck/memcheck.mk
include tests/pysites/pysites.mk
include tests/metrics/metrics.mk
include tests/fuzz/fuzz.mk
include tests/realstack/realstack.mk
