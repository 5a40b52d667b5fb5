/* lib_core.c - libccshim.so is libccscore.la and nothing else; libtool
 * wants one source of the library's own. */
#include "shim.h"
