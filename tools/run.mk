# tools/run.mk - ccshim-run, the launcher wrapper.
bin_PROGRAMS += ccshim-run
ccshim_run_SOURCES = tools/ccshim-run.c tools/run_choose.c tools/run_choose.h src/core/config.c src/core/ccs_config.h src/core/config_table.h \
	src/coalesce/coalesce_parse.c src/coalesce/coalesce.h
ccshim_run_CPPFLAGS = $(AM_CPPFLAGS) -DCCSHIM_LIBDIR='"$(libdir)"' $(SODIUM_CFLAGS)
# libsodium for --new-secret's random bytes (its static archive, as the libraries).
ccshim_run_LDADD = -L$(SODIUM_LIBDIR) -l:libsodium.a
# Where the libraries and the Python helper are relative to the installed
# ccshim-run (a moved tree or `make install prefix=...` finds its own).
ccshim_run_CPPFLAGS += -DCCSHIM_BINDIR='"$(bindir)"' -DCCSHIM_PKGDATADIR='"$(pkgdatadir)"'
