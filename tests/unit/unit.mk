# tests/unit/unit.mk - rules for these tests (filled in by their owner)
