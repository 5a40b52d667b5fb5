# tests/metrics/metrics.mk - live metrics (docs/metrics.md): promtool accepts
# the files, the counts equal ccshim-audit's, they grow while a job runs, a
# verdict is counted, an unwritable destination costs one log line.
METRICS_SHELL_TESTS = tests/metrics/metrics.sh
dist_check_SCRIPTS += $(METRICS_SHELL_TESTS)
TESTS += $(METRICS_SHELL_TESTS)
