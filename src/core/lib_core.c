/* lib_core.c - libccshim.so is libccsparts.la and nothing else; libtool
 * wants one source of the library's own. */
