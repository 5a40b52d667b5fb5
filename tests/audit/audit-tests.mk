# tests/audit/audit-tests.mk - rules for these tests (filled in by their owner)
