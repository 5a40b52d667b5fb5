# tests/tests.mk - test suites; each area keeps its own fragment.
EXTRA_DIST += tests/tap.sh
include tests/unit/unit.mk
include tests/integration/integration.mk
include tests/nccl/nccl.mk
include tests/trainer/trainer-tests.mk
include tests/audit/audit-tests.mk
include tests/desync/desync-tests.mk
include tests/coalesce/coalesce-tests.mk
