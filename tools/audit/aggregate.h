/*
 * aggregate.h - what the files of the audit's reader share (aggregate.c
 * reads a trace and folds each record; aggregate_sites.c interns call
 * sites; aggregate_buffers.c counts reductions per buffer and their
 * repeats; aggregate_patterns.c makes the reference rank's call pattern;
 * aggregate_reference.c compares each rank with the reference): the state
 * of one file's reading, and the steps each offers the reader.
 */
#ifndef CCS_AUDIT_AGGREGATE_H
#define CCS_AUDIT_AGGREGATE_H

#include "audit.h"
#include "trace_reader.h"
#include <stddef.h>
#include <stdint.h>

/* (step, comm, buffer, kind) -> reductions of one buffer in one step. */
/* One buffer of one step: its address AND size (count, datatype) AND
 * operation, so that a 2 MiB call and a 1.5 MiB bucket that happen to share
 * an address are two buffers, not one reduced k+1 times. */
struct buf_use {
    struct buf_key {
        uint64_t comm, buf, count;
        uint32_t step, kind;
        uint32_t dtype, op;
    } k;
    uint64_t count, deferred, bytes;
    uint32_t site;
};

/* Interned call label of the reference rank's pattern. */
struct label {
    struct label_key {
        uint64_t bytes, buf;
        uint32_t kind, deferred;
        uint32_t pysite_site; /* site index when the call had a Python site, else 0 */
        uint32_t pad;
    } k;
    uint32_t id;
};

/* The sites map holds pointers, so sites never move. */
struct site_ref {
    struct audit_site_key k;
    struct audit_site *p;
};

/* (global site, file's pysite id) -> global site as reached from that line. */
struct pair {
    struct pair_key {
        uint32_t site, pysite;
    } k;
    uint32_t index;
};

/* Calls of a file's site id read before its SITE chunk (the writer puts
 * it after them when the site was first seen during a flush): counted at
 * the site once the chunk comes. */
struct site_pending {
    uint64_t id;
    uint64_t count, bytes, deferred;
    uint32_t kinds_mask, pad;
};

/* A communicator or site id: described by the file (a COMM or SITE chunk)
 * and/or named by records (the first such record's position). */
struct id_use {
    uint64_t id;
    uint64_t defined, first_use; /* first_use: the first record naming it (from 1), 0 none */
};

struct token {
    uint64_t comm, seq, order;
    uint32_t step, label;
};

/* What reading one file keeps until its end. */
struct file_reading {
    struct audit *a;
    struct audit_file *f;
    uint32_t *site_map; /* file site id -> global site index */
    size_t site_map_n;
    char **modules; /* module id -> path */
    size_t nmodules;
    char **pytexts; /* pysite id -> text */
    size_t npytexts;
    struct hmap pairs;
    uint64_t ncalls; /* calls so far (for inferred steps) */
    /* Damage (the format has no checksum): records with a value no writer
     * makes, left out, and the ids the records name, to find at the end
     * those no COMM or SITE chunk of the file describes. */
    uint64_t impossible, items; /* items: records read so far, from 1 */
    char first_impossible[160];
    struct hmap comm_ids; /* struct id_use */
    struct hmap site_ids; /* struct id_use */
    uint64_t last_comm_id, last_site_id;
    struct hmap pending_sites; /* struct site_pending */
    struct hmap bufs;
    /* one-entry caches: consecutive records mostly hit the same cell */
    struct audit_cell *last_cell;
    struct audit_seqsum *last_sum;
    /* reference rank only */
    int is_ref;
    struct token *toks;
    size_t ntoks, captoks;
    int toks_capped;
    struct hmap labels;
    size_t nlabels;
    struct hmap bufidx; /* buffer address -> @bufN */
    struct hmap last_seq; /* comm -> its last sequence number so far in the stream */
};

/* Notes that ID is described (DEFINED) or named by the current item (aggregate.c). */
void agg_note_id(struct file_reading *rd, struct hmap *m, uint64_t id, int defined);

/* aggregate_sites.c: a module, a Python site and a call site as a file
 * describes them; the global site of a record (as reached from its Python
 * site, if any). */
void agg_on_module(struct file_reading *rd, uint32_t id, const char *path);
void agg_on_pysite(struct file_reading *rd, uint32_t id, const char *text);
void agg_on_site(struct file_reading *rd, const struct ccs_item *it);
uint32_t agg_record_site(struct file_reading *rd, const struct ccs_record *r);

/* aggregate_buffers.c: a reduction counted on its buffer in its step; at a
 * file's end, its buffers folded into the repeats and --expect rules. */
void agg_count_buffer_use(struct file_reading *rd, const struct ccs_record *r, uint32_t step, uint32_t site,
                          int deferred);
void agg_fold_buffers(struct file_reading *rd);

/* aggregate_patterns.c: the reference rank's calls kept as tokens, and at
 * its file's end made into each communicator's pattern. */
void agg_keep_token(struct file_reading *rd, const struct ccs_record *r, uint32_t step, uint32_t site);
void agg_make_patterns(struct file_reading *rd);

/* aggregate_reference.c: a sequenced call compared with the reference
 * rank's at the same seq; at the end, each rank's first difference where
 * the shorter of two streams ends. */
void agg_compare_with_reference(struct file_reading *rd, const struct ccs_record *r, uint32_t step);
void agg_finish_first_diffs(struct audit *a);

#endif
