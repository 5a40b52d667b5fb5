# tools/python/python.mk - the PyTorch helper of `ccshim-run --torch`
# (docs/coalescing.md): installed in $(pkgdatadir)/python; ccshim-run run
# from the build tree uses the source tree's copy.
ccshimpythondir = $(pkgdatadir)/python
dist_ccshimpython_DATA = tools/python/ccshim_torch.py tools/python/ccshim_ddpsync.py tools/python/sitecustomize.py tools/python/ccshim_imports.py \
	tools/python/ccshim_lib.py tools/python/ccshim_sites.py
ccshim_run_CPPFLAGS += -DCCSHIM_PYTHONDIR='"$(pkgdatadir)/python"' \
	-DCCSHIM_SRC_PYTHONDIR='"$(abs_top_srcdir)/tools/python"'
