# tests/integration/integration.mk - rules for these tests (filled in by their owner)
