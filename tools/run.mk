# tools/run.mk - ccshim-run, the launcher wrapper.
bin_PROGRAMS += ccshim-run
ccshim_run_SOURCES = tools/ccshim-run.c src/core/config.c src/core/ccs_config.h src/core/config_table.h
ccshim_run_CPPFLAGS = $(AM_CPPFLAGS) -DCCSHIM_LIBDIR='"$(libdir)"'
