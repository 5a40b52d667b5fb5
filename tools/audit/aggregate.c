/*
 * aggregate.c - reads every rank's trace once, streaming, and folds each
 * record into the per-(step, rank, comm, kind) cells and the few per-step
 * facts the findings need (its sites, buffers, the reference's pattern and
 * the comparison with it in the aggregate_*.c beside it, aggregate.h).  Nothing here keeps records: per-file state is
 * freed when the file ends, so memory grows with ranks x steps, not calls.
 */
#include "aggregate.h"
#include "ccs_kinds.h"
#include "trace_reader.h"
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>


void audit_init(struct audit *a)
{
    memset(a, 0, sizeof *a);
    hmap_init(&a->cells, sizeof(struct audit_cell), sizeof(struct audit_cell_key));
    hmap_init(&a->seqsums, sizeof(struct audit_seqsum), sizeof(struct audit_seqsum_key));
    hmap_init(&a->stepcomms, sizeof(struct audit_stepcomm), sizeof(struct audit_stepcomm_key));
    hmap_init(&a->rankcomms, sizeof(struct audit_rankcomm), sizeof(struct audit_rankcomm_key));
    hmap_init(&a->sites, sizeof(struct site_ref), sizeof(struct audit_site_key));
    audit_time_init(a);
    a->max_tokens = 1u << 20;
    a->max_ref_fp = 1u << 22;
    a->want_patterns = 1;
    a->ref_rank = -1;
    a->chrome_last = UINT32_MAX;
}

void audit_free(struct audit *a)
{
    for (size_t i = 0; i < a->nfiles; i++) {
        free(a->files[i].path);
        free(a->files[i].error);
        free(a->files[i].inflight);
        free(a->files[i].site_map);
    }
    free(a->files);
    for (size_t i = 0; i < a->nreports; i++)
        free(a->reports[i].path);
    free(a->reports);
    for (size_t i = 0; i < a->stepcomms.cap; i++) {
        struct audit_stepcomm *s = hmap_slot(&a->stepcomms, i);
        if (s)
            free(s->pattern);
    }
    for (size_t i = 0; i < a->nsites; i++) {
        struct audit_site *s = a->site_list[i];
        free(s->module);
        free(s->symbol);
        free(s->resolved);
        free(s->src_file);
        free(s->frames);
        free(s->pysite);
        free(s);
    }
    free(a->site_list);
    for (size_t i = 0; i < a->ncomms; i++) {
        free(a->comms[i].ref_fp);
        free(a->comms[i].ref_step);
        free(a->comms[i].members);
    }
    free(a->comms);
    free(a->expects);
    free(a->findings);
    audit_symbolizer_free(a);
    audit_sinks_free(a);
    hmap_free(&a->cells);
    hmap_free(&a->seqsums);
    hmap_free(&a->stepcomms);
    hmap_free(&a->rankcomms);
    hmap_free(&a->sites);
    audit_time_free(a);
}

struct audit_comm *audit_comm_get(struct audit *a, uint64_t id, int create)
{
    for (size_t i = 0; i < a->ncomms; i++)
        if (a->comms[i].id == id)
            return &a->comms[i];
    if (!create)
        return NULL;
    if (a->ncomms == a->comms_cap) {
        size_t nc = a->comms_cap ? a->comms_cap * 2 : 8;
        struct audit_comm *n = realloc(a->comms, nc * sizeof *n);
        if (!n)
            return NULL;
        a->comms = n;
        a->comms_cap = nc;
    }
    struct audit_comm *c = &a->comms[a->ncomms++];
    memset(c, 0, sizeof *c);
    c->id = id;
    c->size = -1;
    c->color = -1;
    c->ref_rank = -1;
    return c;
}

/* Notes that ID is described (DEFINED) or named by the current item. */
void agg_note_id(struct file_reading *rd, struct hmap *m, uint64_t id, int defined)
{
    struct id_use k = {id, 0, 0}, *u = hmap_get(m, &k, 1);
    if (!u)
        return;
    if (defined)
        u->defined = 1;
    else if (!u->first_use)
        u->first_use = rd->items;
}

static void on_comm(struct file_reading *rd, const struct ccs_trace_comm *comm)
{
    agg_note_id(rd, &rd->comm_ids, comm->id, 1);
    audit_sinks_comm(rd->a, rd->f, comm);
    struct audit_comm *c = audit_comm_get(rd->a, comm->id, 1);
    if (!c)
        return;
    c->parent = comm->parent;
    c->size = comm->size;
    c->backend = comm->backend;
    c->how = comm->how;
    c->color = comm->color;
    c->members_seen++;
}



/* ---- what one call record feeds: the sinks, then the aggregates */

/* Calls captured into CUDA graphs: how many, and the first and last rank. */
static void note_captured(struct audit *a, const struct audit_file *f)
{
    if (!a->captured || f->rank < a->captured_rank_first)
        a->captured_rank_first = f->rank;
    if (!a->captured || f->rank > a->captured_rank_last)
        a->captured_rank_last = f->rank;
    a->captured++;
}

/* How far the file got: calls, last step, end of its last call. */
static void note_progress(struct audit *a, struct audit_file *f, const struct ccs_record *r, uint32_t step)
{
    f->records++;
    f->collectives += ccs_kind_class(r->kind) == CCS_CLASS_COLL;
    f->torch_calls += r->backend == CCS_BE_TORCH;
    if (step > f->last_step)
        f->last_step = step;
    if (step > a->max_step)
        a->max_step = step;
    if (r->t_start + r->t_dur > f->t_last_ns)
        f->t_last_ns = r->t_start + r->t_dur;
}

/* The (step, rank, comm, kind, deferred) cell: count, bytes, time. */
static void count_in_cell(struct file_reading *rd, const struct ccs_record *r, uint32_t step, int deferred)
{
    struct audit *a = rd->a;
    struct audit_cell_key ck;
    memset(&ck, 0, sizeof ck);
    ck.comm = r->comm;
    ck.step = step;
    ck.rank = rd->f->rank;
    ck.kind = r->kind;
    ck.deferred = (uint32_t)deferred;
    struct audit_cell *c = rd->last_cell;
    if (!c || memcmp(&c->k, &ck, sizeof ck) != 0) {
        size_t before = a->cells.n;
        c = hmap_get(&a->cells, &ck, 1);
        if (a->cells.n != before)
            rd->last_sum = NULL; /* unrelated map, but keep the rule simple */
        rd->last_cell = c;
    }
    if (c) {
        c->count++;
        c->bytes += r->bytes;
        c->time_ns += r->t_dur;
    }
}

/* The call site's totals and the kinds called there. */
static void count_at_site(struct audit *a, const struct ccs_record *r, uint32_t site, int deferred)
{
    if (!site || site > a->nsites)
        return;
    struct audit_site *s = a->site_list[site - 1];
    s->count++;
    s->bytes += r->bytes;
    s->deferred += (uint64_t)deferred;
    if (r->kind < 32)
        s->kinds_mask |= 1u << r->kind;
}

/* The (step, rank, comm) sum the members must agree on: sequenced
 * collectives, an order-free sum of their fingerprints, the first number. */
static void sum_sequenced(struct file_reading *rd, const struct ccs_record *r, uint32_t step)
{
    struct audit_seqsum_key sk;
    memset(&sk, 0, sizeof sk);
    sk.comm = r->comm;
    sk.step = step;
    sk.rank = rd->f->rank;
    struct audit_seqsum *s = rd->last_sum;
    if (!s || memcmp(&s->k, &sk, sizeof sk) != 0) {
        s = hmap_get(&rd->a->seqsums, &sk, 1);
        rd->last_sum = s;
    }
    if (s) {
        uint64_t seq_and_fingerprint[2] = {r->seq, r->fingerprint};
        s->ncoll++;
        s->fpsum += hmap_hash(seq_and_fingerprint, sizeof seq_and_fingerprint);
        if (s->first_seq == 0 || r->seq < s->first_seq)
            s->first_seq = r->seq;
    }
}

/* What in R no writer makes (a kind, datatype, operation or backend that
 * does not exist), into WHAT; 0 when nothing is.  Kinds are only ever
 * appended, so an unknown one is damage or a newer ccshim: said so. */
static int impossible(const struct ccs_record *r, char *what, size_t n)
{
    if (strcmp(ccs_kind_name(r->kind), "?") == 0)
        snprintf(what, n, "kind %u, unknown to this ccshim-audit: damage, or a newer ccshim", (unsigned)r->kind);
    else if (strcmp(ccs_dtype_name(r->dtype), "?") == 0)
        snprintf(what, n, "datatype %u", (unsigned)r->dtype);
    else if (strcmp(ccs_op_name(r->op), "?") == 0)
        snprintf(what, n, "operation %u", (unsigned)r->op);
    else if (strcmp(ccs_backend_name(r->backend), "?") == 0)
        snprintf(what, n, "backend %u", (unsigned)r->backend);
    else
        return 0;
    return 1;
}

static void on_record(struct file_reading *rd, const struct ccs_record *r)
{
    struct audit *a = rd->a;
    struct audit_file *f = rd->f;
    char what[120];
    if (impossible(r, what, sizeof what)) { /* left out: its counts would be made up */
        if (!rd->impossible++)
            snprintf(rd->first_impossible, sizeof rd->first_impossible, "record %" PRIu64 ": %s", rd->items, what);
        return;
    }
    /* (Consecutive records mostly name the same ones: looked up once.) */
    if (r->comm && r->comm != rd->last_comm_id)
        agg_note_id(rd, &rd->comm_ids, rd->last_comm_id = r->comm, 0);
    if (r->site && r->site != rd->last_site_id)
        agg_note_id(rd, &rd->site_ids, rd->last_site_id = r->site, 0);
    int cls = ccs_kind_class(r->kind);
    if (cls == CCS_CLASS_MARK) {
        /* Mark s ends step s - 1: the steps count from the marks, also
         * where no collective was recorded (a gloo job under --torch). */
        if (r->kind == CCS_KIND_STEP && r->step > 0 && a->steps.source == STEPS_MARKERS) {
            if (r->step - 1 > f->last_step)
                f->last_step = r->step - 1;
            if (r->step - 1 > a->max_step)
                a->max_step = r->step - 1;
        }
        audit_sinks_record(a, f, r, r->step, 0);
        return;
    }
    uint32_t step = audit_step_of(f, r, rd->ncalls++);
    int deferred = (r->flags & CCS_F_DEFERRED) != 0;
    /* Per step and rank the helper's real reductions get rows of their own. */
    int cell_kind = deferred ? 1 : (r->flags & CCS_F_HELPER) ? 2 : 0;
    if (r->flags & CCS_F_CAPTURED)
        note_captured(a, f);
    uint32_t site = agg_record_site(rd, r);
    note_progress(a, f, r, step);

    audit_sinks_record(a, f, r, step, site);

    count_in_cell(rd, r, step, cell_kind);
    if (!site && r->site && !r->pysite) { /* its SITE chunk is still to come */
        struct site_pending pk = {.id = r->site}, *pend = hmap_get(&rd->pending_sites, &pk, 1);
        if (pend) {
            pend->count++;
            pend->bytes += r->bytes;
            pend->deferred += (uint64_t)deferred;
            if (r->kind < 32)
                pend->kinds_mask |= 1u << r->kind;
        }
    }
    count_at_site(a, r, site, deferred);
    audit_time_record(a, f, r, step, site);
    agg_count_buffer_use(rd, r, step, site, deferred);
    if (ccs_kind_sequenced(r->kind) && r->comm && r->seq) { /* what desync compares */
        sum_sequenced(rd, r, step);
        agg_compare_with_reference(rd, r, step);
    }
    if (rd->is_ref && a->want_patterns)
        agg_keep_token(rd, r, step, site);
}

/* ---- one file */

static void file_ctx_init(struct file_reading *rd, struct audit *a, struct audit_file *f, int is_ref)
{
    memset(rd, 0, sizeof *rd);
    rd->a = a;
    rd->f = f;
    rd->is_ref = is_ref;
    hmap_init(&rd->bufs, sizeof(struct buf_use), sizeof(struct buf_key));
    hmap_init(&rd->labels, sizeof(struct label), sizeof(struct label_key));
    hmap_init(&rd->bufidx, 16, 8);
    hmap_init(&rd->last_seq, 16, 8);
    hmap_init(&rd->pairs, sizeof(struct pair), sizeof(struct pair_key));
    hmap_init(&rd->comm_ids, sizeof(struct id_use), sizeof(uint64_t));
    hmap_init(&rd->site_ids, sizeof(struct id_use), sizeof(uint64_t));
    hmap_init(&rd->pending_sites, sizeof(struct site_pending), sizeof(uint64_t));
}

static void file_ctx_free(struct file_reading *rd)
{
    hmap_free(&rd->bufs);
    hmap_free(&rd->labels);
    hmap_free(&rd->bufidx);
    hmap_free(&rd->last_seq);
    free(rd->toks);
    free(rd->site_map);
    for (size_t i = 0; i < rd->nmodules; i++)
        free(rd->modules[i]);
    free(rd->modules);
    for (size_t i = 0; i < rd->npytexts; i++)
        free(rd->pytexts[i]);
    free(rd->pytexts);
    hmap_free(&rd->pairs);
    hmap_free(&rd->comm_ids);
    hmap_free(&rd->site_ids);
    hmap_free(&rd->pending_sites);
}

static void on_item(struct file_reading *rd, const struct ccs_item *it)
{
    switch (it->type) {
    case CCS_ITEM_RECORD:
        rd->items++;
        on_record(rd, &it->u.record);
        break;
    case CCS_ITEM_COMM:
        on_comm(rd, &it->u.comm);
        break;
    case CCS_ITEM_MODULE:
        agg_on_module(rd, it->u.module.id, it->u.module.path);
        break;
    case CCS_ITEM_SITE:
        agg_on_site(rd, it);
        break;
    case CCS_ITEM_INFLIGHT: { /* a call in progress at the end: counted, and kept for the post-mortem */
        rd->items++;
        uint64_t ncalls = rd->ncalls;
        rd->a->reading_inflight = 1;
        on_record(rd, &it->u.record);
        rd->a->reading_inflight = 0;
        struct audit_file *f = rd->f;
        struct audit_inflight *n = realloc(f->inflight, (f->ninflight + 1) * sizeof *n);
        if (n) {
            f->inflight = n;
            n[f->ninflight].r = it->u.record;
            n[f->ninflight].step = ccs_kind_class(it->u.record.kind) == CCS_CLASS_MARK
                                       ? it->u.record.step
                                       : audit_step_of(f, &it->u.record, ncalls);
            n[f->ninflight].site = agg_record_site(rd, &it->u.record);
            f->ninflight++;
        }
        break;
    }
    case CCS_ITEM_END:
        rd->f->has_end = 1;
        rd->f->end = it->u.end;
        break;
    case CCS_ITEM_PYSITE:
        agg_on_pysite(rd, it->u.pysite.id, it->u.pysite.text);
        break;
    case CCS_ITEM_META:
        break;
    }
}

static void copy_meta(struct audit_file *f, struct ccs_trace_reader *r)
{
    const char *v;
    if ((v = ccs_trace_meta(r, "host")))
        snprintf(f->host, sizeof f->host, "%s", v);
    if ((v = ccs_trace_meta(r, "job")))
        snprintf(f->job, sizeof f->job, "%s", v);
    if ((v = ccs_trace_meta(r, "exe")))
        snprintf(f->exe, sizeof f->exe, "%s", v);
    if ((v = ccs_trace_meta(r, "uncovered")))
        snprintf(f->uncovered, sizeof f->uncovered, "%s", v);
}

static void set_error(struct audit_file *f, int status, const char *message)
{
    f->status = status;
    free(f->error);
    f->error = strdup(message);
}

/* Ids the records of a whole file named that no chunk of it describes:
 * the writer describes every communicator and site it names before the END
 * chunk, so such a name is damage.  The first into WHAT; how many. */
static uint64_t undescribed(const struct hmap *m, const char *noun, char *what, size_t n)
{
    uint64_t k = 0, first = UINT64_MAX;
    for (size_t i = 0; i < m->cap; i++) {
        const struct id_use *u = hmap_slot((struct hmap *)m, i);
        if (!u || u->defined || !u->first_use)
            continue;
        k++;
        if (u->first_use < first) {
            first = u->first_use;
            snprintf(what, n, "record %" PRIu64 ": %s %016" PRIx64 ", which no chunk of the file describes", u->first_use,
                     noun, u->id);
        }
    }
    return k;
}

/* Marks a file cut short (RC 0: no END chunk) or damaged (RC < 0, ERR, or
 * values no writer makes) and says so. */
static void note_read_status(struct file_reading *rd, struct ccs_trace_reader *r, int rc, const char *err)
{
    struct audit_file *f = rd->f;
    char what[200] = "", m[1200];
    uint64_t names = 0;
    if (rc == 0 && !ccs_trace_truncated(r)) { /* whole: every id it names is described */
        names = undescribed(&rd->comm_ids, "communicator", what, sizeof what);
        char w2[200] = "";
        uint64_t sites = undescribed(&rd->site_ids, "call site", w2, sizeof w2);
        if (!names && sites)
            snprintf(what, sizeof what, "%s", w2);
        names += sites;
    }
    /* The writer puts the rank in the header and in the META chunk alike. */
    const char *meta_rank = ccs_trace_meta(r, "rank");
    char *end = NULL;
    long mr = meta_rank ? strtol(meta_rank, &end, 10) : 0;
    int rank_differs = meta_rank && end && *end == 0 && mr != (long)f->rank;
    if (rd->impossible || names || rank_differs) {
        /* The format has no checksum: damage shows where a value cannot be
         * right, and other values of the file may be wrong as well. */
        int o = snprintf(m, sizeof m, "%s: damaged: ", f->path);
        if (rank_differs)
            o += snprintf(m + o, sizeof m - (size_t)o,
                          "the header says rank %d, the META chunk rank %ld (the file is sorted and counted as "
                          "rank %d); ",
                          (int)f->rank, mr, (int)f->rank);
        if (rd->impossible)
            o += snprintf(m + o, sizeof m - (size_t)o,
                          "%" PRIu64 " record%s hold%s a value no writer makes, left out (the first: %s); ",
                          rd->impossible, rd->impossible == 1 ? "" : "s", rd->impossible == 1 ? "s" : "",
                          rd->first_impossible);
        if (names && o > 0 && (size_t)o < sizeof m)
            o += snprintf(m + o, sizeof m - (size_t)o, "%" PRIu64 " id%s named by records but never described (the "
                          "first: %s); ", names, names == 1 ? "" : "s", what);
        if (o > 0 && (size_t)o < sizeof m)
            snprintf(m + o, sizeof m - (size_t)o, "%s", rc < 0 ? err : "every other record was read");
        set_error(f, FILE_DAMAGED, m);
        fprintf(stderr, "ccshim-audit: %s; read %" PRIu64 " calls\n", m, f->records);
        return;
    }
    if (ccs_trace_truncated(r)) {
        if (rc < 0) {
            set_error(f, FILE_TRUNCATED, err);
        } else {
            char m[600];
            snprintf(m, sizeof m, "%s: truncated: no END chunk (the process did not finish writing)", f->path);
            set_error(f, FILE_TRUNCATED, m);
        }
        fprintf(stderr, "ccshim-audit: %s; read %" PRIu64 " calls up to step %u\n", f->error, f->records,
                f->last_step);
    } else if (rc < 0) {
        set_error(f, FILE_DAMAGED, err);
        fprintf(stderr, "ccshim-audit: %s; read %" PRIu64 " calls before it\n", err, f->records);
    }
}

static void read_file(struct audit *a, struct audit_file *f, int is_ref)
{
    char err[512];
    struct ccs_trace_reader *r = ccs_trace_open(f->path, err, sizeof err);
    if (!r) {
        set_error(f, FILE_REFUSED, err);
        fprintf(stderr, "ccshim-audit: skipped %s\n", err);
        return;
    }
    struct file_reading rd;
    file_ctx_init(&rd, a, f, is_ref);
    audit_sinks_rank_begin(a, f);
    struct ccs_item it;
    int rc;
    while ((rc = ccs_trace_next(r, &it, err, sizeof err)) == 1)
        on_item(&rd, &it);
    copy_meta(f, r);
    note_read_status(&rd, r, rc, err);
    audit_sinks_rank_end(a, f);
    agg_fold_buffers(&rd);
    if (is_ref)
        agg_make_patterns(&rd);
    ccs_trace_close(r);
    f->site_map = rd.site_map; /* the file's from now on (a flight dump's site ids) */
    f->site_map_n = rd.site_map_n;
    rd.site_map = NULL;
    file_ctx_free(&rd);
}

size_t audit_read_all(struct audit *a)
{
    size_t n = 0;
    for (size_t i = 0; i < a->nfiles; i++) {
        struct audit_file *f = &a->files[i];
        if (f->status == FILE_REFUSED) {
            fprintf(stderr, "ccshim-audit: skipped %s\n", f->error);
            continue;
        }
        int is_ref = a->ref_rank < 0;
        if (is_ref)
            a->ref_rank = f->rank;
        read_file(a, f, is_ref);
        if (f->status != FILE_REFUSED)
            n++;
    }
    agg_finish_first_diffs(a);
    audit_time_finish(a);
    return n;
}
