# tests/fuzz/fuzz.mk - libFuzzer targets (docs/fuzzing.md): the trace
# reader and the audit, the side channel's decoders, coordinator and
# client, the CCSHIM_* settings, ccshim-audit --expect.  Built with
# $(FUZZ_CC) -fsanitize=fuzzer,address,undefined when configure found a
# clang that links it (HAVE_LIBFUZZER); each target compiles the sources
# it tests itself, instrumented, whatever CC builds the libraries.
#   make check                  each target a few seconds over its corpus
#                               (tests/fuzz/fuzz-check.sh, one point each)
#   make fuzz [FUZZ_SECONDS=60] [FUZZ_ONLY=fuzz_trace]
#                               each target FUZZ_SECONDS; new inputs kept
#                               in tests/fuzz/found/<target> of the build
# Seeds and regression inputs: tests/fuzz/corpus/<target>/ (written by
# tests/fuzz/fuzz_seeds, and every input that once found a bug).
FUZZ_NAMES = fuzz_trace fuzz_dsx_proto fuzz_dsx_coord fuzz_dsx_client fuzz_config fuzz_expect
FUZZ_SECONDS = 60
FUZZ_ONLY =
FUZZ_CHECK = tests/fuzz/fuzz-check.sh
TESTS += $(FUZZ_CHECK)
dist_check_SCRIPTS += $(FUZZ_CHECK)
EXTRA_DIST += tests/fuzz/corpus tests/fuzz/fuzz_common.h tests/fuzz/fuzz_dsx.h tests/fuzz/fuzz_log.c \
	tests/fuzz/fuzz_trace.c tests/fuzz/fuzz_dsx_proto.c tests/fuzz/fuzz_dsx_coord.c tests/fuzz/fuzz_dsx_client.c \
	tests/fuzz/fuzz_config.c tests/fuzz/fuzz_expect.c

# The seed writer (gcc-built, against the project's own structures and
# encoders): `tests/fuzz/fuzz_seeds DIR` writes DIR/<target>/seed-*.
check_PROGRAMS += tests/fuzz/fuzz_seeds
tests_fuzz_fuzz_seeds_SOURCES = tests/fuzz/fuzz_seeds.c
tests_fuzz_fuzz_seeds_CPPFLAGS = $(AM_CPPFLAGS) $(SODIUM_CFLAGS)
tests_fuzz_fuzz_seeds_LDADD = libccsparts.la -lpthread

if HAVE_LIBFUZZER
FUZZ_BINS = tests/fuzz/fuzz_trace tests/fuzz/fuzz_dsx_proto tests/fuzz/fuzz_dsx_coord tests/fuzz/fuzz_dsx_client \
	tests/fuzz/fuzz_config tests/fuzz/fuzz_expect
check_SCRIPTS = $(FUZZ_BINS)
CLEANFILES += $(FUZZ_BINS)
FUZZ_FLAGS = -g -O1 -std=c11 -D_GNU_SOURCE -Wall -Wextra -fsanitize=fuzzer,address,undefined \
	-fno-sanitize-recover=undefined -pthread
FUZZ_INCLUDES = -I$(top_builddir) -I$(top_srcdir)/include -I$(top_srcdir)/src/core -I$(top_srcdir)/src/trace \
	-I$(top_srcdir)/src/desync -I$(top_srcdir)/src/coalesce -I$(top_srcdir)/tools/audit -I$(top_srcdir)/tests/fuzz
# Prerequisites are sources and headers; only the .c files are compiled,
# except those a target #includes to reach their static functions
# (desync_coord.c, desync_client.c, config.c, log.c, coalesce_policy.c).
FUZZ_LINK = $(AM_V_GEN)$(MKDIR_P) tests/fuzz && \
	$(FUZZ_CC) $(FUZZ_FLAGS) $(FUZZ_INCLUDES) $(SODIUM_CFLAGS) \
	`for f in $^; do case /$$f in */src/desync/desync_coord.c|*/src/desync/desync_client.c|*/src/core/config.c|\
	*/src/core/log.c|*/src/coalesce/coalesce_policy.c) ;; *.c) echo $$f ;; esac; done` -o $@

FUZZ_CORE_H = $(top_srcdir)/src/core/log.h $(top_srcdir)/src/core/ccs_kinds.h \
	$(top_srcdir)/src/core/ccs_config.h $(top_srcdir)/src/core/config_table.h tests/fuzz/fuzz_common.h
FUZZ_DSX_SRCS = $(FUZZ_CORE_H) tests/fuzz/fuzz_dsx.h tests/fuzz/fuzz_log.c src/desync/desync_conn.c \
	src/desync/desync_conn.h src/desync/desync_auth.c src/desync/desync_auth.h src/desync/desync_proto.c \
	src/desync/desync_proto.h src/desync/desync_rules.c src/desync/desync_rules.h src/desync/desync_rules_ctx.h \
	src/desync/desync_rules_ctx.c \
	src/desync/desync_rule_mismatch.c src/desync/desync_rule_boundary.c src/desync/desync_rule_blocked.c src/desync/desync_rule_foreign.c \
	src/desync/desync_seen.c src/desync/desync_search.c \
	src/desync/desync_search.h src/desync/desync_tcp.h src/desync/desync_agg.c src/desync/desync_agg.h \
	src/core/names.c src/core/clock.c src/core/fingerprint.c \
	src/core/sig_canon.c src/core/sig_canon.h

# The audit's sources include its OTF2 export (out_otf2.c, optional at
# configure time: HAVE_OTF2): its flags and library as libccsaudit gets
# them (tools/audit/audit.mk).
tests/fuzz/fuzz_trace: tests/fuzz/fuzz_trace.c $(FUZZ_CORE_H) src/core/trace_format.h $(libccsaudit_la_SOURCES)
	$(FUZZ_LINK) $(OTF2_CFLAGS) $(OTF2_LIBS)
tests/fuzz/fuzz_dsx_proto: tests/fuzz/fuzz_dsx_proto.c $(FUZZ_CORE_H) src/desync/desync_proto.c \
		src/desync/desync_proto.h src/desync/desync_agg.c src/desync/desync_agg.h src/core/names.c
	$(FUZZ_LINK)
tests/fuzz/fuzz_dsx_coord: tests/fuzz/fuzz_dsx_coord.c src/desync/desync_coord.c src/desync/desync_coord.h \
		src/desync/desync_coord_net.c src/desync/desync_tree_root.c src/desync/desync_rule_unreachable.c src/desync/desync_fold.c src/desync/desync_fold.h $(FUZZ_DSX_SRCS) \
		src/core/thread.c src/core/thread.h
	$(FUZZ_LINK) $(SODIUM_LIBS)
tests/fuzz/fuzz_dsx_client: tests/fuzz/fuzz_dsx_client.c src/desync/desync_client.c $(FUZZ_DSX_SRCS)
	$(FUZZ_LINK) $(SODIUM_LIBS)
tests/fuzz/fuzz_config: tests/fuzz/fuzz_config.c src/core/config.c src/core/log.c src/core/private_file.c \
		src/coalesce/coalesce_policy.c src/coalesce/coalesce_parse.c src/coalesce/coalesce.h $(FUZZ_CORE_H) \
		src/core/fingerprint.c src/core/names.c
	$(FUZZ_LINK)
tests/fuzz/fuzz_expect: tests/fuzz/fuzz_expect.c tools/audit/expect.c tools/audit/audit.h tools/audit/hmap.c \
		tools/audit/hmap.h $(FUZZ_CORE_H) src/core/names.c
	$(FUZZ_LINK)

fuzz: $(FUZZ_BINS)
	CCSHIM_FUZZ_SECONDS='$(FUZZ_SECONDS)' CCSHIM_FUZZ_ONLY='$(FUZZ_ONLY)' \
	  CCSHIM_FUZZ_KEEP='$(abs_top_builddir)/tests/fuzz/found' \
	  top_srcdir='$(abs_top_srcdir)' top_builddir='$(abs_top_builddir)' \
	  $(SHELL) $(abs_top_srcdir)/$(FUZZ_CHECK)
else
fuzz:
	@echo "make fuzz: configure found no clang that links -fsanitize=fuzzer (set FUZZ_CC, see its summary)" >&2; exit 1
endif
.PHONY: fuzz
