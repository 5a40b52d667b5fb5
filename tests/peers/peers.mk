# tests/peers/peers.mk - peers' own test suites under ccshim: mpi4py's
# (tests/peers/mpi4py-suite.sh; its sources, of the installed python3-mpi4py's
# version, fetched at setup by scripts/mpi4py-suite.sh, so that make check
# needs no network; skipped, with one line saying why, where they could not
# be fetched).
PEERS_SHELL_TESTS = tests/peers/mpi4py-suite.sh
dist_check_SCRIPTS += $(PEERS_SHELL_TESTS)
TESTS += $(PEERS_SHELL_TESTS)
