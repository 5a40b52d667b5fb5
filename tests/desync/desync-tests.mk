# tests/desync/desync-tests.mk - rules for these tests (filled in by their owner)
