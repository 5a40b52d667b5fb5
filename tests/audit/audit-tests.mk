# tests/audit/audit-tests.mk - tests of ccshim-audit on synthetic traces
# written by tests/audit/mktrace (the format of src/core/trace_format.h).
check_PROGRAMS += tests/audit/mktrace
tests_audit_mktrace_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/tests/audit
tests_audit_mktrace_SOURCES = tests/audit/mktrace.c tests/audit/tracegen.c tests/audit/tracegen.h

if HAVE_CHECK
check_PROGRAMS += tests/audit/check_audit
tests_audit_check_audit_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/tools/audit -I$(top_srcdir)/tests/audit
tests_audit_check_audit_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_audit_check_audit_SOURCES = tests/audit/check_audit.c tests/audit/tracegen.c tests/audit/tracegen.h
tests_audit_check_audit_LDADD = libccsaudit.la $(CHECK_LIBS)
TESTS += tests/audit/check_audit
endif

AUDIT_TESTS = \
	tests/audit/audit-basic.sh \
	tests/audit/audit-findings.sh \
	tests/audit/audit-outputs.sh \
	tests/audit/audit-otf2.sh \
	tests/audit/audit-sites.sh \
	tests/audit/audit-allclear.sh \
	tests/audit/audit-comms.sh \
	tests/audit/audit-hang.sh \
	tests/audit/audit-time.sh \
	tests/audit/audit-steps.sh
TESTS += $(AUDIT_TESTS)
dist_check_SCRIPTS += $(AUDIT_TESTS)
EXTRA_DIST += tests/audit/check_chrome.py tests/audit/sites.c tests/audit/comms.c
CLEANFILES += tests/audit/report.png

bench_list += bench/audit-bench.sh
EXTRA_DIST += bench/audit-bench.sh
