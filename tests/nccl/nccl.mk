# tests/nccl/nccl.mk - rules for these tests (filled in by their owner)
