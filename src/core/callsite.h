/*
 * callsite.h - call sites (callsite.c, symbolize_dw.c): a stack unwound
 * and cached once per return address, named for reports.
 */
#ifndef CCS_CALLSITE_H
#define CCS_CALLSITE_H

#include "attributes.h"
#include <stddef.h>
#include <stdint.h>

/* Id (>= 1) of the call site at PC, unwinding and caching its stack on first
 * sight; 0 when the site table is full.  Lock-free after first sight. */
CCS_HIDDEN uint32_t ccs_site_id(void *pc);

#define CCS_MAX_STACK 32

/* Copies site ID's stack; returns 0, or -1 for an unknown id. */
CCS_HIDDEN int ccs_site_get(uint32_t id, void **pcs, uint32_t *depth);

/* Number of sites so far (ids are 1..n). */
CCS_HIDDEN uint32_t ccs_site_count(void);

/* Writes "func+0xoff (module+0xoff)" for PC into BUF (dladdr; diagnostic path). */
CCS_HIDDEN void ccs_site_symbolize(void *pc, char *buf, size_t n);

/* Writes "func+0xoff at file.c:LINE (module+0xoff)" for PC, through libdw
 * (loaded RTLD_LOCAL on first use), falling back to ccs_site_symbolize.
 * Diagnostic path only: the desync reports (symbolize_dw.c). */
CCS_HIDDEN void ccs_site_symbolize_full(void *pc, char *buf, size_t n);

/* Another process's call site as ccs_site_symbolize wrote it without a
 * symbol ("MODULE+0xOFFSET"): when this process has MODULE loaded too (the
 * same program on every rank), names it as ccs_site_symbolize_full does.
 * 0, or -1 when TEXT is not of that form or MODULE is not loaded here. */
CCS_HIDDEN int ccs_site_resymbolize(const char *text, char *out, size_t n);

#endif
