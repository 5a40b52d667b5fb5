# tests/unit/unit.mk - Check suites of the core's pure logic, and what the
# core's tables refuse at build time.
TESTS += tests/unit/kinds-table.sh tests/unit/kinds-lists.sh tests/unit/doc-lines.sh
dist_check_SCRIPTS += tests/unit/kinds-table.sh tests/unit/kinds-lists.sh tests/unit/doc-lines.sh
if HAVE_CHECK
UNIT_TESTS = tests/unit/test_config tests/unit/test_fingerprint tests/unit/test_comm \
	tests/unit/test_sequence tests/unit/test_trace tests/unit/test_callsite tests/unit/test_names \
	tests/unit/test_registry
check_PROGRAMS += $(UNIT_TESTS)
TESTS += $(UNIT_TESTS)
UNIT_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/tests/unit $(CHECK_CFLAGS)
UNIT_LDADD = libccsparts.la libccstrace.la $(CHECK_LIBS) -lpthread
tests_unit_test_config_SOURCES = tests/unit/test_config.c tests/unit/unit_main.h
tests_unit_test_config_CPPFLAGS = $(UNIT_CPPFLAGS)
tests_unit_test_config_LDADD = $(UNIT_LDADD)
tests_unit_test_fingerprint_SOURCES = tests/unit/test_fingerprint.c
tests_unit_test_fingerprint_CPPFLAGS = $(UNIT_CPPFLAGS)
tests_unit_test_fingerprint_LDADD = $(UNIT_LDADD)
tests_unit_test_comm_SOURCES = tests/unit/test_comm.c
tests_unit_test_comm_CPPFLAGS = $(UNIT_CPPFLAGS)
tests_unit_test_comm_LDADD = $(UNIT_LDADD)
tests_unit_test_sequence_SOURCES = tests/unit/test_sequence.c
tests_unit_test_sequence_CPPFLAGS = $(UNIT_CPPFLAGS)
tests_unit_test_sequence_LDADD = $(UNIT_LDADD)
tests_unit_test_trace_SOURCES = tests/unit/test_trace.c
tests_unit_test_trace_CPPFLAGS = $(UNIT_CPPFLAGS)
tests_unit_test_trace_LDADD = $(UNIT_LDADD)
tests_unit_test_names_SOURCES = tests/unit/test_names.c
tests_unit_test_names_CPPFLAGS = $(UNIT_CPPFLAGS)
tests_unit_test_names_LDADD = $(UNIT_LDADD)
tests_unit_test_registry_SOURCES = tests/unit/test_registry.c
tests_unit_test_registry_CPPFLAGS = $(UNIT_CPPFLAGS)
tests_unit_test_registry_LDADD = $(UNIT_LDADD)
tests_unit_test_callsite_SOURCES = tests/unit/test_callsite.c
tests_unit_test_callsite_CPPFLAGS = $(UNIT_CPPFLAGS)
tests_unit_test_callsite_LDADD = $(UNIT_LDADD)
tests_unit_test_callsite_LDFLAGS = -rdynamic
endif
