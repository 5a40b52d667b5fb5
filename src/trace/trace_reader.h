/*
 * trace_reader.h - streaming reader of one per-rank trace file.
 *
 * Reads chunk by chunk with a fixed buffer, so any trace can be read in
 * bounded memory.  A file that is not a trace, is of a newer version or of
 * the other byte order is refused at open with a message naming the file
 * and what is wrong.  A truncated tail (a job that died) is reported through
 * ccs_trace_truncated() after the last whole item.
 */
#ifndef CCS_TRACE_READER_H
#define CCS_TRACE_READER_H

#include "trace_format.h"
#include <stddef.h>

enum ccs_item_type {
    CCS_ITEM_META = 1,
    CCS_ITEM_COMM,
    CCS_ITEM_MODULE,
    CCS_ITEM_SITE,
    CCS_ITEM_RECORD,
    CCS_ITEM_END,
    CCS_ITEM_PYSITE, /* version 2 */
    CCS_ITEM_INFLIGHT, /* u.record, a call that had not returned when the process
                          ended (INFLIGHT chunk); t_dur is its time so far */
};

#define CCS_MAX_FRAMES 32

struct ccs_item {
    enum ccs_item_type type;
    union {
        struct {
            const char *text; /* "key=value\n" lines, NUL-terminated */
        } meta;
        struct ccs_trace_comm comm;
        struct {
            uint32_t id;
            const char *path; /* NUL-terminated */
        } module;
        struct {
            uint32_t id;
            uint32_t depth;
            struct ccs_trace_frame frames[CCS_MAX_FRAMES];
            const char *symbols[CCS_MAX_FRAMES]; /* NULL when none */
        } site;
        struct ccs_record record; /* RECORD and INFLIGHT; version 1: pysite and reserved2 read as 0 */
        struct ccs_trace_end end;
        struct {
            uint32_t id;
            const char *text; /* NUL-terminated, printable ASCII (others shown as '?') */
        } pysite;
    } u;
};

struct ccs_trace_reader;

/* Opens PATH.  Returns NULL with a message in ERR when it is not a readable
 * trace of a version this build understands. */
struct ccs_trace_reader *ccs_trace_open(const char *path, char *err, size_t errlen);

/* The header read at open. */
const struct ccs_trace_header *ccs_trace_hdr(const struct ccs_trace_reader *r);

/* Reads the next item into ITEM (pointers in it stay valid until the next
 * call).  Returns 1 for an item, 0 at the end of the file, -1 on a damaged
 * or truncated file (message in ERR). */
int ccs_trace_next(struct ccs_trace_reader *r, struct ccs_item *item, char *err, size_t errlen);

/* After ccs_trace_next returned 0 or -1: 1 when the file ended without an END
 * chunk or inside a chunk (the process died), else 0. */
int ccs_trace_truncated(const struct ccs_trace_reader *r);
/* 1 when the reader stopped at damage (a chunk that cannot be right): the
 * file is then not truncated, whatever it lacks. */
int ccs_trace_damaged(const struct ccs_trace_reader *r);

/* Records known to be lost: those of a records chunk the file ends inside
 * (its whole records before the cut are read, then ccs_trace_next returns
 * -1 saying how many were read and lost). */
uint64_t ccs_trace_lost(const struct ccs_trace_reader *r);

/* Value of KEY in the META chunks read so far, or NULL. */
const char *ccs_trace_meta(const struct ccs_trace_reader *r, const char *key);

void ccs_trace_close(struct ccs_trace_reader *r);

#endif
