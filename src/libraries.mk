# src/libraries.mk - the two preload libraries, built from one convenience
# library per folder of src/ (docs/design.md draws how they depend):
#
#   src/core      process identity, config, log, clock, comm table, call
#                 sites, records and rings, the feature registry
#   src/trace     the trace writer (a feature) and the trace reader (tools)
#   src/desync    desync detection (a feature)
#   src/coalesce  coalescing (a feature)
#   src/metrics   live metrics (a feature)
#   src/nccl      the NCCL interposer and its glue to the features
#   src/mpi       the MPI interposer and its glue: exactly libccshim-mpi.so's
#                 own sources
#
# Each folder compiles with the include paths of what it may use and
# nothing else, so an arrow the wrong way (the core naming a feature, a
# feature naming another, anything but src/mpi including <mpi.h>) does not
# build.  libccsparts.la joins every part but the MPI interposer:
#   libccshim.so      libccsparts.la (links neither MPI, NCCL nor CUDA)
#   libccshim-mpi.so  libccsparts.la + src/mpi (links the MPI found)
# ccshim-run preloads exactly one of them; if both end up loaded, the second
# stays inactive (src/core/runtime.c), so nothing is counted twice.

CORE_INCLUDES = -I$(top_srcdir)/src/core
LIB_CPPFLAGS = $(BASE_CPPFLAGS) -DCCSHIM_BUILDING_LIBRARY $(UNWIND_CFLAGS) $(CORE_INCLUDES)
LIB_CFLAGS = $(AM_CFLAGS) -fvisibility=hidden -pthread

noinst_LTLIBRARIES += libccs_core.la
libccs_core_la_SOURCES = \
	src/core/ccs_config.h src/core/ccs_kinds.h src/core/config_table.h src/core/log.h \
	src/core/attributes.h src/core/callsite.h src/core/clock.h src/core/comm.h src/core/fingerprint.h \
	src/core/process.h src/core/pysite.h src/core/real.h src/core/record.h src/core/ring.h src/core/runtime.h \
	src/core/trace_format.h src/core/registry.h src/core/agree.h src/core/step.h src/core/verdicts.h src/core/abort.h \
	src/core/callsite.c src/core/clock.c src/core/comm.c src/core/config.c src/core/registry.c \
	src/core/agree.c src/core/boundary.c src/core/verdicts.c src/core/abort.c \
	src/core/fingerprint.c src/core/sig_canon.h src/core/sig_canon.c src/core/symbolize_dw.c src/core/dwline.c src/core/dwline.h src/core/log.c src/core/names.c src/core/process.c src/core/thread.h src/core/thread.c src/core/real.c src/core/record.c \
	src/core/pysite.c src/core/ring.c src/core/private_file.h src/core/private_file.c src/core/uncovered.h src/core/uncovered.c \
	src/core/runtime.c
libccs_core_la_CPPFLAGS = $(LIB_CPPFLAGS)
libccs_core_la_CFLAGS = $(LIB_CFLAGS)
libccs_core_la_LIBADD = $(UNWIND_LIBS)

noinst_LTLIBRARIES += libccs_tracewriter.la
libccs_tracewriter_la_SOURCES = src/trace/trace_writer.h src/trace/trace_writer.c
libccs_tracewriter_la_CPPFLAGS = $(LIB_CPPFLAGS) -I$(top_srcdir)/src/trace
libccs_tracewriter_la_CFLAGS = $(LIB_CFLAGS)

# Desync detection (docs/desync.md).
noinst_LTLIBRARIES += libccs_desync.la
libccs_desync_la_SOURCES = src/desync/desync.h src/desync/desync.c src/desync/desync_start.h \
	src/desync/desync_start.c src/desync/desync_proto.h \
	src/desync/desync_proto.c src/desync/desync_rules.h src/desync/desync_rules.c src/desync/desync_rules_ctx.h src/desync/desync_rules_ctx.c \
	src/desync/desync_rule_mismatch.c src/desync/desync_rule_boundary.c src/desync/desync_rule_blocked.c src/desync/desync_rule_foreign.c \
	src/desync/desync_rule_unreachable.c src/desync/desync_seen.c src/desync/desync_claim.h src/desync/desync_claim.c src/desync/desync_shm.h \
	src/desync/desync_shm.c src/desync/desync_tcp.h src/desync/desync_conn.h src/desync/desync_conn.c \
	src/desync/desync_coord.h src/desync/desync_coord.c src/desync/desync_coord_net.c src/desync/desync_tree_root.c src/desync/desync_tree_relay.c src/desync/desync_fold.h src/desync/desync_fold.c src/desync/desync_search.h src/desync/desync_search.c src/desync/desync_client.c src/desync/desync_auth.h src/desync/desync_auth.c src/desync/desync_collect.h \
	src/desync/desync_collect.c src/desync/desync_device.h src/desync/desync_device.c \
	src/desync/desync_report.h src/desync/desync_report.c src/desync/desync_agg.h src/desync/desync_agg.c
# desync.c's jobs, a file each (desync_state.h lists them).
libccs_desync_la_SOURCES += src/desync/desync_state.h src/desync/desync_verdict.c src/desync/desync_host.c \
	src/desync/desync_exit.c src/desync/desync_begin.c src/desync/desync_agree.c
libccs_desync_la_CPPFLAGS = $(LIB_CPPFLAGS) -I$(top_srcdir)/src/desync $(SODIUM_CFLAGS)
libccs_desync_la_CFLAGS = $(LIB_CFLAGS)
# libsodium (the side channel's MAC and sealing) from its static archive:
# linked into the preload libraries and tools, its symbols hidden from the
# job (--exclude-libs; the version scripts keep them local too).
libccs_desync_la_LIBADD = -L$(SODIUM_LIBDIR) -l:libsodium.a
SODIUM_HIDE = -Wl,--exclude-libs,libsodium.a

# Coalescing (docs/coalescing.md).
noinst_LTLIBRARIES += libccs_coalesce.la
libccs_coalesce_la_SOURCES = src/coalesce/coalesce.h src/coalesce/coalesce_policy.c src/coalesce/coalesce_helper.c src/coalesce/coalesce_parse.c \
	src/coalesce/coalesce_table.c src/coalesce/coalesce_defer.c src/coalesce/coalesce_step.c \
	src/coalesce/coalesce_complete.c src/coalesce/coalesce_boundary.c
libccs_coalesce_la_CPPFLAGS = $(LIB_CPPFLAGS) -I$(top_srcdir)/src/coalesce
libccs_coalesce_la_CFLAGS = $(LIB_CFLAGS)

# Live metrics (docs/metrics.md).
noinst_LTLIBRARIES += libccs_metrics.la
libccs_metrics_la_SOURCES = src/metrics/metrics.c
libccs_metrics_la_CPPFLAGS = $(LIB_CPPFLAGS)
libccs_metrics_la_CFLAGS = $(LIB_CFLAGS)

# The backends see the features they glue to.
BACKEND_CPPFLAGS = $(LIB_CPPFLAGS) -I$(top_srcdir)/src/desync -I$(top_srcdir)/src/coalesce

noinst_LTLIBRARIES += libccsparts.la
libccsparts_la_SOURCES =
libccsparts_la_LIBADD = libccs_core.la libccs_tracewriter.la libccs_desync.la libccs_coalesce.la libccs_metrics.la
if HAVE_NCCL
noinst_LTLIBRARIES += libccs_nccl.la
libccs_nccl_la_SOURCES = src/nccl/nccl_internal.h src/nccl/nccl_fns.h src/nccl/nccl_redop.h src/nccl/desync_nccl.h \
	src/nccl/coalesce_nccl.h src/nccl/nccl_real.c src/nccl/nccl_comm.c src/nccl/nccl_redop.c \
	src/nccl/nccl_wrap.c src/nccl/desync_nccl.c src/nccl/coalesce_nccl.c src/nccl/nccl_track.h src/nccl/nccl_track.c \
	src/nccl/nccl_track_state.h src/nccl/nccl_track_poll.c
libccs_nccl_la_CPPFLAGS = $(BACKEND_CPPFLAGS) -I$(top_srcdir)/src/nccl $(NCCL_CFLAGS)
libccs_nccl_la_CFLAGS = $(LIB_CFLAGS)
libccsparts_la_LIBADD += libccs_nccl.la
endif

lib_LTLIBRARIES += libccshim.la
libccshim_la_SOURCES = src/core/lib_core.c
libccshim_la_CPPFLAGS = $(LIB_CPPFLAGS)
libccshim_la_CFLAGS = $(LIB_CFLAGS)
libccshim_la_LIBADD = libccsparts.la -lpthread
libccshim_la_LDFLAGS = -avoid-version -no-undefined $(SODIUM_HIDE) -Wl,--version-script=$(srcdir)/src/libccshim.map
EXTRA_libccshim_la_DEPENDENCIES = $(srcdir)/src/libccshim.map
EXTRA_DIST += src/libccshim.map src/libccshim-mpi.map

if HAVE_MPI
lib_LTLIBRARIES += libccshim-mpi.la
libccshim_mpi_la_SOURCES = src/mpi/mpi_shim.h src/mpi/mpi_real.c src/mpi/mpi_setup.c src/mpi/mpi_sig.c src/mpi/mpi_wrap.c \
	src/mpi/mpi_handles.c src/mpi/mpi_persist.c src/mpi/coalesce_mpi.h \
	src/mpi/coalesce_mpi.c src/mpi/desync_mpi.h src/mpi/desync_mpi.c
libccshim_mpi_la_CPPFLAGS = $(BACKEND_CPPFLAGS) -I$(top_srcdir)/src/mpi $(MPI_CFLAGS)
libccshim_mpi_la_CFLAGS = $(LIB_CFLAGS)
libccshim_mpi_la_LIBADD = libccsparts.la $(MPI_LIBS) -lpthread
libccshim_mpi_la_LDFLAGS = -avoid-version -no-undefined $(SODIUM_HIDE) -Wl,--version-script=$(srcdir)/src/libccshim-mpi.map
EXTRA_libccshim_mpi_la_DEPENDENCIES = $(srcdir)/src/libccshim-mpi.map
endif

# The trace reader and the name tables, for the tools and tests.
noinst_LTLIBRARIES += libccstrace.la
libccstrace_la_SOURCES = src/trace/trace_reader.c src/trace/trace_reader.h src/core/names.c
