/*
 * pysite.h - annotated call sites (pysite.c): the text a language
 * helper sets with ccshim_annotate, interned, and the current one that
 * the hot path copies into each record.
 */
#ifndef CCS_PYSITE_H
#define CCS_PYSITE_H

#include "attributes.h"
#include <stdatomic.h>
#include <stdint.h>

/* Annotated call sites (ccshim_annotate): the current one, process-wide;
 * the hot path copies it into rec->pysite with one relaxed load. */
#define CCS_PYSITE_TEXT 200 /* bytes of one site's text, NUL included */
extern CCS_HIDDEN _Atomic uint32_t ccs_pysite_current;

/* Id (>= 1) of TEXT, interned on first sight (slow path); 0 for NULL or
 * empty text or when the table is full (logged once). */
CCS_HIDDEN uint32_t ccs_pysite_intern(const char *text);

/* Text of ID (stable storage), or NULL for 0 or an unknown id.  Lock-free. */
CCS_HIDDEN const char *ccs_pysite_text(uint32_t id);

/* Number of sites so far (ids are 1..n). */
CCS_HIDDEN uint32_t ccs_pysite_count(void);

/* In the child after fork. */
CCS_HIDDEN void ccs_pysite_forked(void);

#endif
