# src/core.mk - the two preload libraries.
#
# libccscore.la (not installed) is the core: runtime, recording, trace
# writer, NCCL interception.  It is linked whole into both preload libraries:
#   libccshim.so      core only (links neither MPI, NCCL nor CUDA)
#   libccshim-mpi.so  core + MPI wrappers through PMPI (links the MPI found)
# ccshim-run preloads exactly one of them; if both end up loaded, the second
# stays inactive (runtime.c), so nothing is counted twice.

CORE_CPPFLAGS = $(AM_CPPFLAGS) -DCCSHIM_BUILDING_LIBRARY $(UNWIND_CFLAGS)
CORE_CFLAGS = $(AM_CFLAGS) -fvisibility=hidden -pthread

noinst_LTLIBRARIES += libccscore.la
libccscore_la_SOURCES = \
	src/ccs_config.h src/ccs_kinds.h src/config_table.h src/log.h src/shim.h src/trace_format.h \
	src/callsite.c src/clock.c src/comm.c src/config.c src/fingerprint.c src/log.c src/names.c \
	src/real.c src/record.c src/ring.c src/runtime.c src/trace_writer.c \
	src/coalesce.h src/coalesce_policy.c src/coalesce_table.c src/coalesce_defer.c src/coalesce_step.c \
	src/coalesce_complete.c
# Desync detection (docs/desync.md).
libccscore_la_SOURCES += src/desync.h src/desync.c src/desync_proto.h src/desync_proto.c src/desync_rules.h \
	src/desync_rules.c src/desync_shm.h src/desync_shm.c src/desync_tcp.h src/desync_tcp.c src/desync_auth.h src/desync_auth.c src/desync_collect.h \
	src/desync_collect.c src/desync_report.h src/desync_report.c
libccscore_la_CPPFLAGS = $(CORE_CPPFLAGS)
libccscore_la_CFLAGS = $(CORE_CFLAGS)
libccscore_la_LIBADD = $(UNWIND_LIBS)
# libsodium (the side channel's MAC) from its static archive: linked into
# the preload libraries and tools, its symbols hidden from the job
# (--exclude-libs; the version scripts keep them local too).
libccscore_la_CPPFLAGS += $(SODIUM_CFLAGS)
libccscore_la_LIBADD += -L$(SODIUM_LIBDIR) -l:libsodium.a
SODIUM_HIDE = -Wl,--exclude-libs,libsodium.a
if HAVE_NCCL
libccscore_la_SOURCES += $(NCCL_WRAP_SOURCES) src/coalesce_nccl.h src/coalesce_nccl.c
libccscore_la_CPPFLAGS += $(NCCL_CFLAGS)
endif
NCCL_WRAP_SOURCES = src/nccl_internal.h src/nccl_redop.h src/desync_nccl.h src/desync_nccl.c \
	src/nccl_real.c src/nccl_comm.c src/nccl_redop.c src/nccl_wrap.c

lib_LTLIBRARIES += libccshim.la
libccshim_la_SOURCES = src/lib_core.c
libccshim_la_CPPFLAGS = $(CORE_CPPFLAGS)
libccshim_la_CFLAGS = $(CORE_CFLAGS)
libccshim_la_LIBADD = libccscore.la -lpthread
libccshim_la_LDFLAGS = -avoid-version -no-undefined $(SODIUM_HIDE) -Wl,--version-script=$(srcdir)/src/libccshim.map
EXTRA_libccshim_la_DEPENDENCIES = $(srcdir)/src/libccshim.map
EXTRA_DIST += src/libccshim.map src/libccshim-mpi.map

if HAVE_MPI
lib_LTLIBRARIES += libccshim-mpi.la
libccshim_mpi_la_SOURCES = src/mpi_shim.h src/mpi_setup.c src/mpi_wrap.c src/coalesce_mpi.h src/coalesce_mpi.c src/desync_mpi.h src/desync_mpi.c
libccshim_mpi_la_CPPFLAGS = $(CORE_CPPFLAGS) $(MPI_CFLAGS)
libccshim_mpi_la_CFLAGS = $(CORE_CFLAGS)
libccshim_mpi_la_LIBADD = libccscore.la $(MPI_LIBS) -lpthread
libccshim_mpi_la_LDFLAGS = -avoid-version -no-undefined $(SODIUM_HIDE) -Wl,--version-script=$(srcdir)/src/libccshim-mpi.map
EXTRA_libccshim_mpi_la_DEPENDENCIES = $(srcdir)/src/libccshim-mpi.map
endif

# The trace reader and the name tables, for the tools and tests.
noinst_LTLIBRARIES += libccstrace.la
libccstrace_la_SOURCES = src/trace_reader.c src/trace_reader.h src/names.c
