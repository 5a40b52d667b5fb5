/*
 * real.h - finding the intercepted library's own functions (real.c).
 */
#ifndef CCS_REAL_H
#define CCS_REAL_H

#include "attributes.h"

/* The next definition of NAME after this library (dlsym RTLD_NEXT); failing
 * that, NAME in an already loaded library among SONAMES (NULL-terminated),
 * without loading anything.  NULL when none. */
CCS_HIDDEN void *ccs_real_symbol(const char *name, const char *const *sonames);

#endif
