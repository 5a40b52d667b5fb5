# tools/audit/audit.mk - ccshim-audit, the offline auditor of a job's traces
# (docs/audit.md).  Everything but main.c is in a convenience library that
# the unit tests link too.
noinst_LTLIBRARIES += libccsaudit.la
libccsaudit_la_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/tools/audit $(OTF2_CFLAGS)
libccsaudit_la_LIBADD = $(OTF2_LIBS)
libccsaudit_la_SOURCES = \
	tools/audit/audit.h \
	tools/audit/hmap.c tools/audit/hmap.h \
	tools/audit/files.c \
	tools/audit/aggregate.h tools/audit/aggregate.c tools/audit/aggregate_sites.c \
	tools/audit/aggregate_buffers.c tools/audit/aggregate_patterns.c tools/audit/aggregate_reference.c \
	tools/audit/steps.c \
	tools/audit/pattern.c \
	tools/audit/findings.c \
	tools/audit/timing.c \
	tools/audit/expect.c \
	tools/audit/symbols.c \
	tools/audit/util.c \
	tools/audit/sinks.c \
	tools/audit/out_table.c \
	tools/audit/out_json.c \
	tools/audit/out_tsv.c \
	tools/audit/out_chrome.c \
	tools/audit/out_html.c \
	tools/audit/out_otf2.c \
	src/trace/trace_reader.c src/trace/trace_reader.h \
	src/core/names.c \
	src/core/dwline.c src/core/dwline.h

bin_PROGRAMS += ccshim-audit
ccshim_audit_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/tools/audit
ccshim_audit_SOURCES = tools/audit/main.c
ccshim_audit_LDADD = libccsaudit.la
