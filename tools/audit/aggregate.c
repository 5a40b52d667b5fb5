/*
 * aggregate.c - reads every rank's trace once, streaming, and folds each
 * record into the per-(step, rank, comm, kind) cells and the few per-step
 * facts the findings need.  Nothing here keeps records: per-file state is
 * freed when the file ends, so memory grows with ranks x steps, not calls.
 */
#include "audit.h"
#include "ccs_kinds.h"
#include "trace_reader.h"
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

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
static void note_id(struct file_reading *rd, struct hmap *m, uint64_t id, int defined)
{
    struct id_use k = {id, 0, 0}, *u = hmap_get(m, &k, 1);
    if (!u)
        return;
    if (defined)
        u->defined = 1;
    else if (!u->first_use)
        u->first_use = rd->items;
}

static void on_module(struct file_reading *rd, uint32_t id, const char *path)
{
    if (id > 1u << 16)
        return;
    if (id >= rd->nmodules) {
        char **n = realloc(rd->modules, (id + 1) * sizeof *n);
        if (!n)
            return;
        memset(n + rd->nmodules, 0, (id + 1 - rd->nmodules) * sizeof *n);
        rd->modules = n;
        rd->nmodules = id + 1;
    }
    free(rd->modules[id]);
    rd->modules[id] = strdup(path);
}

static const char *module_path(struct file_reading *rd, uint32_t id)
{
    return id < rd->nmodules ? rd->modules[id] : NULL;
}

/* The site of KEY, created (*CREATED = 1) when new; NULL when out of memory. */
static struct audit_site *site_get(struct audit *a, struct audit_site_key key, int *created)
{
    struct site_ref *slot = hmap_get(&a->sites, &key, 0);
    if (slot)
        return slot->p;
    struct audit_site *s = calloc(1, sizeof *s);
    struct audit_site **nl = realloc(a->site_list, (a->nsites + 1) * sizeof *nl);
    if (nl)
        a->site_list = nl;
    if (!s || !nl) {
        free(s);
        return NULL;
    }
    s->k = key;
    s->index = (uint32_t)a->nsites + 1;
    a->site_list[a->nsites++] = s;
    slot = hmap_get(&a->sites, &key, 1);
    if (slot)
        slot->p = s;
    *created = 1;
    return s;
}

static void on_pysite(struct file_reading *rd, uint32_t id, const char *text)
{
    if (id > 1u << 20)
        return;
    if (id >= rd->npytexts) {
        size_t nn = id + 1 > rd->npytexts * 2 ? id + 1 : rd->npytexts * 2;
        char **n = realloc(rd->pytexts, nn * sizeof *n);
        if (!n)
            return;
        memset(n + rd->npytexts, 0, (nn - rd->npytexts) * sizeof *n);
        rd->pytexts = n;
        rd->npytexts = nn;
    }
    free(rd->pytexts[id]);
    rd->pytexts[id] = strdup(text);
}

/* Global index of native site SITE (0: unknown) as reached from the file's
 * annotated site PYSITE: a site of its own, merged across ranks by the
 * native stack and the text.  SITE itself when the text is unknown. */
static uint32_t site_with_pysite(struct file_reading *rd, uint32_t site, uint32_t pysite)
{
    struct audit *a = rd->a;
    struct pair_key pk = {site, pysite};
    struct pair *p = hmap_get(&rd->pairs, &pk, 0);
    if (p)
        return p->index;
    const char *text = pysite < rd->npytexts ? rd->pytexts[pysite] : NULL;
    if (!text)
        return site; /* not (yet) defined in this file: not cached */
    struct audit_site *base = site && site <= a->nsites ? a->site_list[site - 1] : NULL;
    uint64_t h = base ? base->k.hash : 0x5117e5u;
    h ^= hmap_hash(text, strlen(text)) + 0x7f4a7c159e3779b9ull + (h << 6) + (h >> 2);
    struct audit_site_key key = {h};
    int created = 0;
    struct audit_site *s = site_get(a, key, &created);
    if (s && created) {
        s->pysite = strdup(text);
        if (base) {
            s->module = base->module ? strdup(base->module) : NULL;
            s->offset = base->offset;
            s->symbol = base->symbol ? strdup(base->symbol) : NULL;
            s->resolved = base->resolved ? strdup(base->resolved) : NULL;
            s->frames = base->frames ? strdup(base->frames) : NULL;
        }
    }
    uint32_t idx = s ? s->index : site;
    p = hmap_get(&rd->pairs, &pk, 1);
    if (p)
        p->index = idx;
    return idx;
}

static void on_site(struct file_reading *rd, const struct ccs_item *it)
{
    struct audit *a = rd->a;
    uint32_t id = it->u.site.id, depth = it->u.site.depth;
    note_id(rd, &rd->site_ids, id, 1);
    if (id > 1u << 20)
        return;
    /* Identity across ranks: the modules' paths and the frames' offsets. */
    uint64_t h = 0x5117e5u;
    for (uint32_t i = 0; i < depth; i++) {
        const char *m = module_path(rd, it->u.site.frames[i].module);
        h ^= hmap_hash(m ? m : "", m ? strlen(m) : 0) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
        h ^= hmap_hash(&it->u.site.frames[i].offset, 8) + (h << 6) + (h >> 2);
    }
    struct audit_site_key key = {h};
    int created = 0;
    struct audit_site *s = site_get(a, key, &created);
    if (!s)
        return;
    if (created) {
        if (depth > 0) {
            const char *m = module_path(rd, it->u.site.frames[0].module);
            s->module = m ? strdup(m) : NULL;
            s->offset = it->u.site.frames[0].offset;
            s->symbol = it->u.site.symbols[0] ? strdup(it->u.site.symbols[0]) : NULL;
        }
        char fr[2048];
        size_t o = 0;
        fr[0] = 0;
        for (uint32_t i = 0; i < depth && o < sizeof fr - 1; i++) {
            const char *sym = it->u.site.symbols[i];
            const char *m = module_path(rd, it->u.site.frames[i].module);
            const char *base = m ? strrchr(m, '/') : NULL;
            if (sym)
                o += snprintf(fr + o, sizeof fr - o, "%s%s", i ? ";" : "", sym);
            else
                o += snprintf(fr + o, sizeof fr - o, "%s%s+0x%" PRIx64, i ? ";" : "",
                              base ? base + 1 : (m ? m : "?"), it->u.site.frames[i].offset);
        }
        s->frames = strdup(fr);
        audit_site_resolve(a, s);
    }
    if (id >= rd->site_map_n) {
        size_t nn = id + 1 > rd->site_map_n * 2 ? id + 1 : rd->site_map_n * 2;
        uint32_t *n = realloc(rd->site_map, nn * sizeof *n);
        if (!n)
            return;
        memset(n + rd->site_map_n, 0, (nn - rd->site_map_n) * sizeof *n);
        rd->site_map = n;
        rd->site_map_n = nn;
    }
    rd->site_map[id] = s->index;
    struct site_pending pk = {.id = id}, *pend = hmap_get(&rd->pending_sites, &pk, 0);
    if (pend) { /* its calls read before this chunk */
        s->count += pend->count;
        s->bytes += pend->bytes;
        s->deferred += pend->deferred;
        s->kinds_mask |= pend->kinds_mask;
        pend->count = pend->bytes = pend->deferred = 0;
        pend->kinds_mask = 0;
    }
}

static void on_comm(struct file_reading *rd, const struct ccs_trace_comm *comm)
{
    note_id(rd, &rd->comm_ids, comm->id, 1);
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

static uint32_t intern_label(struct file_reading *rd, const struct ccs_record *r, uint32_t site)
{
    struct label_key k;
    memset(&k, 0, sizeof k);
    k.kind = r->kind;
    k.deferred = (r->flags & CCS_F_DEFERRED) != 0;
    k.bytes = r->bytes;
    k.buf = ccs_kind_reduces(r->kind) ? r->buf : 0;
    k.pysite_site = site && site <= rd->a->nsites && rd->a->site_list[site - 1]->pysite ? site : 0;
    struct label *l = hmap_get(&rd->labels, &k, 0);
    if (l)
        return l->id;
    l = hmap_get(&rd->labels, &k, 1);
    if (!l)
        return 0;
    l->id = (uint32_t)rd->nlabels;
    rd->nlabels++;
    if (k.buf) { /* number buffers in order of first use */
        struct {
            uint64_t buf;
            uint64_t idx;
        } bk = {k.buf, 0}, *b = hmap_get(&rd->bufidx, &bk, 0);
        if (!b) {
            size_t n = rd->bufidx.n;
            b = hmap_get(&rd->bufidx, &bk, 1);
            if (b)
                b->idx = n;
        }
    }
    return l->id;
}

struct label_arg {
    struct file_reading *rd;
    struct label **by_id;
    char buf[256];
};

static const char *label_text(uint32_t id, void *arg)
{
    struct label_arg *la = arg;
    struct file_reading *rd = la->rd;
    if (id < rd->nlabels && la->by_id[id]) {
        struct label *l = la->by_id[id];
        char b[32], kb[48];
        int o = snprintf(la->buf, sizeof la->buf, "%s %s", kind_label(l->k.kind, (int)l->k.deferred, kb, sizeof kb),
                         fmt_bytes(l->k.bytes, b, sizeof b));
        if (l->k.buf) {
            struct {
                uint64_t buf;
                uint64_t idx;
            } bk = {l->k.buf, 0}, *bi = hmap_get(&rd->bufidx, &bk, 0);
            if (bi && o > 0 && (size_t)o < sizeof la->buf)
                o += snprintf(la->buf + o, sizeof la->buf - (size_t)o, " @buf%" PRIu64, bi->idx);
        }
        if (l->k.pysite_site && o > 0 && (size_t)o < sizeof la->buf) {
            /* "from train.py:57": the line, without the function */
            const char *t = rd->a->site_list[l->k.pysite_site - 1]->pysite, *in = strstr(t, " in ");
            int tl = in ? (int)(in - t) : (int)strlen(t);
            snprintf(la->buf + o, sizeof la->buf - (size_t)o, " from %.*s", tl > 80 ? 80 : tl, t);
        }
        return la->buf;
    }
    return "?";
}

static int tok_cmp(const void *p, const void *q)
{
    const struct token *a = p, *b = q;
    if (a->step != b->step)
        return a->step < b->step ? -1 : 1;
    if (a->comm != b->comm)
        return a->comm < b->comm ? -1 : 1;
    if (a->seq != b->seq)
        return a->seq < b->seq ? -1 : 1;
    return a->order < b->order ? -1 : a->order > b->order;
}

/* Compresses the reference rank's calls of each (step, comm) into a pattern. */
static void make_patterns(struct file_reading *rd)
{
    struct audit *a = rd->a;
    struct label_arg la = {.rd = rd};
    if (!rd->ntoks)
        return;
    la.by_id = calloc(rd->nlabels + 1, sizeof *la.by_id);
    if (!la.by_id)
        return;
    for (size_t i = 0; i < rd->labels.cap; i++) {
        struct label *l = hmap_slot(&rd->labels, i);
        if (l && l->id < rd->nlabels)
            la.by_id[l->id] = l;
    }
    qsort(rd->toks, rd->ntoks, sizeof *rd->toks, tok_cmp);
    uint32_t *ids = malloc(rd->ntoks * sizeof *ids);
    if (!ids) {
        free(la.by_id);
        return;
    }
    for (size_t i = 0; i < rd->ntoks;) {
        size_t j = i;
        while (j < rd->ntoks && rd->toks[j].step == rd->toks[i].step && rd->toks[j].comm == rd->toks[i].comm) {
            ids[j - i] = rd->toks[j].label;
            j++;
        }
        struct audit_stepcomm_key k;
        memset(&k, 0, sizeof k);
        k.comm = rd->toks[i].comm;
        k.step = rd->toks[i].step;
        struct audit_stepcomm *sc = hmap_get(&a->stepcomms, &k, 1);
        if (sc && !sc->pattern) {
            char *p = audit_compress(ids, j - i, label_text, &la);
            if (p && rd->toks_capped && j == rd->ntoks) {
                size_t l = strlen(p);
                char *q = realloc(p, l + 32);
                if (q) {
                    strcpy(q + l, ", ... (capped)");
                    p = q;
                }
            }
            sc->pattern = p;
        }
        i = j;
    }
    free(ids);
    free(la.by_id);
}

/* One rank's most repeated buffer in one (step, comm), among one set of reductions. */
struct buffer_repeats {
    uint32_t max_k, repeated;
    uint64_t bytes, count;
    uint32_t kind, dtype, op, site;
};

/* One rank's repeats in one (step, comm): over all reductions and over
 * those coalescing could defer. */
struct rank_repeats {
    struct audit_stepcomm_key k;
    struct buffer_repeats all, coalescible;
};

/* Counts one buffer's real reductions against every --expect /buffer rule of its kind. */
static void check_buffer_expects(struct audit *a, int32_t rank, const struct buf_use *b)
{
    uint64_t real = b->count - b->deferred;
    for (size_t e = 0; e < a->nexpects; e++) {
        struct audit_expect *ex = &a->expects[e];
        if (ex->scope != EXPECT_BUFFER || (uint32_t)ex->kind != b->k.kind)
            continue;
        if (real > ex->limit)
            ex->violations++;
        if (real > ex->worst) {
            ex->worst = real;
            ex->worst_step = b->k.step;
            ex->worst_rank = rank;
            ex->worst_comm = b->k.comm;
        }
    }
}

/* Counts buffer B, reduced REAL times, in R. */
static void note_repeats(struct buffer_repeats *r, const struct buf_use *b, uint64_t real)
{
    if (real > 1)
        r->repeated++;
    if (real > r->max_k || (real == r->max_k && b->bytes > r->bytes)) { /* ties: the largest buffer */
        r->max_k = (uint32_t)real;
        r->bytes = b->bytes;
        r->count = b->k.count;
        r->kind = b->k.kind;
        r->dtype = b->k.dtype;
        r->op = b->k.op;
        r->site = b->site;
    }
}

/* Adds one reduced buffer to its (step, comm)'s repeats on this rank. */
static void note_buffer_repeats(struct rank_repeats *l, const struct buf_use *b)
{
    uint64_t real = b->count - b->deferred; /* deferred ones never reached the network */
    note_repeats(&l->all, b, real);
    if (audit_coalescible(b->k.kind, b->k.dtype, b->k.op, b->bytes))
        note_repeats(&l->coalescible, b, real);
}

/* Merges RANK's repeats R into the (step, comm)'s over all ranks. */
static void merge_repeats(struct audit_repeats *all, const struct buffer_repeats *r, int32_t rank)
{
    if (r->max_k > all->max_k || (r->max_k == all->max_k && r->bytes > all->bytes)) {
        all->max_k = r->max_k;
        all->rank = rank;
        all->bytes = r->bytes;
        all->count = r->count;
        all->kind = r->kind;
        all->dtype = r->dtype;
        all->op = r->op;
        all->site = r->site;
    }
    if (r->max_k > 1) {
        all->ranks_repeating++;
        if (all->min_k == 0 || r->max_k < all->min_k)
            all->min_k = r->max_k;
    }
    if (r->repeated > all->repeated_bufs)
        all->repeated_bufs = r->repeated;
}

/* Folds the file's per-buffer counts into the per-(step, comm) facts. */
static void fold_buffers(struct file_reading *rd)
{
    struct audit *a = rd->a;
    int32_t rank = rd->f->rank;
    struct hmap repeats; /* struct rank_repeats by (step, comm) */
    hmap_init(&repeats, sizeof(struct rank_repeats), sizeof(struct audit_stepcomm_key));
    for (size_t i = 0; i < rd->bufs.cap; i++) {
        struct buf_use *b = hmap_slot(&rd->bufs, i);
        if (!b)
            continue;
        check_buffer_expects(a, rank, b);
        if (!ccs_kind_reduces(b->k.kind))
            continue;
        struct audit_stepcomm_key k;
        memset(&k, 0, sizeof k);
        k.comm = b->k.comm;
        k.step = b->k.step;
        struct rank_repeats *l = hmap_get(&repeats, &k, 1);
        if (l)
            note_buffer_repeats(l, b);
    }
    for (size_t i = 0; i < repeats.cap; i++) {
        struct rank_repeats *l = hmap_slot(&repeats, i);
        struct audit_stepcomm *sc = l ? hmap_get(&a->stepcomms, &l->k, 1) : NULL;
        if (sc) {
            merge_repeats(&sc->all, &l->all, rank);
            merge_repeats(&sc->coalescible, &l->coalescible, rank);
        }
    }
    hmap_free(&repeats);
}

/* ---- what one call record feeds: the sinks, then the aggregates */

/* The global site index of R (0: none), as reached from its Python site if any. */
static uint32_t record_site(struct file_reading *rd, const struct ccs_record *r)
{
    uint32_t site = r->site < rd->site_map_n ? rd->site_map[r->site] : 0;
    if (r->pysite)
        site = site_with_pysite(rd, site, r->pysite);
    return site;
}

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

/* Per-buffer reuse within the step (reductions, and any --expect /buffer kind). */
static void count_buffer_use(struct file_reading *rd, const struct ccs_record *r, uint32_t step, uint32_t site,
                             int deferred)
{
    if (!r->buf || !(ccs_kind_reduces(r->kind) || rd->a->nexpects))
        return;
    struct buf_key bk;
    memset(&bk, 0, sizeof bk);
    bk.comm = r->comm;
    bk.buf = r->buf;
    bk.step = step;
    bk.kind = r->kind;
    bk.count = r->count;
    bk.dtype = r->dtype;
    bk.op = r->op;
    struct buf_use *b = hmap_get(&rd->bufs, &bk, 1);
    if (b) {
        b->count++;
        b->deferred += (uint64_t)deferred;
        b->bytes = r->bytes;
        b->site = site;
    }
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

/* Grows the reference arrays of CM to hold sequence index I, unless that
 * passes MAX_REF (then the reference stays shorter). */
static void grow_reference(struct audit_comm *cm, uint64_t i, uint64_t max_ref)
{
    if (i < cm->ref_cap || i >= max_ref)
        return;
    uint64_t cap = cm->ref_cap ? cm->ref_cap : 1024;
    while (cap <= i)
        cap *= 2;
    uint64_t *fingerprints = realloc(cm->ref_fp, cap * sizeof *fingerprints);
    if (fingerprints)
        cm->ref_fp = fingerprints;
    uint32_t *steps = fingerprints ? realloc(cm->ref_step, cap * sizeof *steps) : NULL;
    if (steps) {
        cm->ref_step = steps;
        memset(fingerprints + cm->ref_cap, 0, (cap - cm->ref_cap) * sizeof *fingerprints);
        memset(steps + cm->ref_cap, 0, (cap - cm->ref_cap) * sizeof *steps);
        cm->ref_cap = cap;
    }
}

/* The first rank seen on a communicator writes its reference fingerprints
 * and steps; every other rank is compared with them and its first
 * departure kept. */
static void compare_with_reference(struct file_reading *rd, const struct ccs_record *r, uint32_t step)
{
    struct audit *a = rd->a;
    int32_t rank = rd->f->rank;
    struct audit_comm *cm = audit_comm_get(a, r->comm, 1);
    struct audit_rankcomm_key rk;
    memset(&rk, 0, sizeof rk);
    rk.comm = r->comm;
    rk.rank = rank;
    struct audit_rankcomm *rc = hmap_get(&a->rankcomms, &rk, 1);
    if (!cm || !rc)
        return;
    if (cm->ref_rank < 0)
        cm->ref_rank = rank;
    if (r->seq > rc->max_seq) {
        rc->max_seq = r->seq;
        rc->max_seq_step = step;
    }
    uint64_t i = r->seq - 1;
    if (cm->ref_rank == rank) {
        grow_reference(cm, i, a->max_ref_fp);
        if (i < cm->ref_cap) {
            cm->ref_fp[i] = r->fingerprint;
            cm->ref_step[i] = step;
            if (i + 1 > cm->ref_len)
                cm->ref_len = i + 1;
        } else {
            cm->ref_capped = 1;
        }
    } else if (i < cm->ref_len && (cm->ref_fp[i] != r->fingerprint || cm->ref_step[i] != step) &&
               (rc->first_diff == 0 || r->seq < rc->first_diff)) {
        rc->first_diff = r->seq;
        rc->first_diff_step = step;
    }
}

/* The reference rank's call stream, for the patterns (capped at max_tokens). */
static void keep_token(struct file_reading *rd, const struct ccs_record *r, uint32_t step, uint32_t site)
{
    if (rd->ntoks == rd->captoks && !rd->toks_capped) {
        size_t cap = rd->captoks ? rd->captoks * 2 : 4096;
        if (cap > rd->a->max_tokens)
            cap = rd->a->max_tokens;
        struct token *grown = cap > rd->captoks ? realloc(rd->toks, cap * sizeof *grown) : NULL;
        if (grown) {
            rd->toks = grown;
            rd->captoks = cap;
        } else {
            rd->toks_capped = 1;
        }
    }
    /* The patterns order a communicator's calls by sequence number (the
     * threads' records interleave chunk by chunk).  A call without one
     * (comm_init, comm_free: 0) goes where it came in the stream: after the
     * last sequenced call of its communicator before it, not first. */
    struct {
        uint64_t comm, seq;
    } lk = {r->comm, 0}, *last = hmap_get(&rd->last_seq, &lk, 1);
    uint64_t seq = r->seq;
    if (last && ccs_kind_sequenced(r->kind) && r->seq > last->seq)
        last->seq = r->seq;
    else if (last && !ccs_kind_sequenced(r->kind) && r->seq == 0)
        seq = last->seq;
    if (rd->ntoks < rd->captoks) {
        struct token *t = &rd->toks[rd->ntoks];
        t->comm = r->comm;
        t->seq = seq;
        t->order = rd->ntoks;
        t->step = step;
        t->label = intern_label(rd, r, site);
        rd->ntoks++;
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
        note_id(rd, &rd->comm_ids, rd->last_comm_id = r->comm, 0);
    if (r->site && r->site != rd->last_site_id)
        note_id(rd, &rd->site_ids, rd->last_site_id = r->site, 0);
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
    uint32_t site = record_site(rd, r);
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
    count_buffer_use(rd, r, step, site, deferred);
    if (ccs_kind_sequenced(r->kind) && r->comm && r->seq) { /* what desync compares */
        sum_sequenced(rd, r, step);
        compare_with_reference(rd, r, step);
    }
    if (rd->is_ref && a->want_patterns)
        keep_token(rd, r, step, site);
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
        on_module(rd, it->u.module.id, it->u.module.path);
        break;
    case CCS_ITEM_SITE:
        on_site(rd, it);
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
            n[f->ninflight].site = record_site(rd, &it->u.record);
            f->ninflight++;
        }
        break;
    }
    case CCS_ITEM_END:
        rd->f->has_end = 1;
        rd->f->end = it->u.end;
        break;
    case CCS_ITEM_PYSITE:
        on_pysite(rd, it->u.pysite.id, it->u.pysite.text);
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
    fold_buffers(&rd);
    if (is_ref)
        make_patterns(&rd);
    ccs_trace_close(r);
    f->site_map = rd.site_map; /* the file's from now on (a flight dump's site ids) */
    f->site_map_n = rd.site_map_n;
    rd.site_map = NULL;
    file_ctx_free(&rd);
}

static int i32_cmp(const void *x, const void *y)
{
    int32_t a = *(const int32_t *)x, b = *(const int32_t *)y;
    return a < b ? -1 : a > b;
}

/* Each communicator's members (ranks with sequenced calls on it), sorted. */
static void index_members(struct audit *a)
{
    for (size_t i = 0; i < a->rankcomms.cap; i++) {
        struct audit_rankcomm *rc = hmap_slot(&a->rankcomms, i);
        struct audit_comm *cm = rc ? audit_comm_get(a, rc->k.comm, 0) : NULL;
        if (!cm)
            continue;
        int32_t *n = realloc(cm->members, (cm->nmembers + 1) * sizeof *n);
        if (!n)
            continue;
        cm->members = n;
        cm->members[cm->nmembers++] = rc->k.rank;
    }
    for (size_t i = 0; i < a->ncomms; i++)
        if (a->comms[i].nmembers)
            qsort(a->comms[i].members, a->comms[i].nmembers, sizeof(int32_t), i32_cmp);
}

/* A rank that stops early or runs on departs from the reference where the
 * shorter of the two ends. */
static void finish_first_diffs(struct audit *a)
{
    index_members(a);
    for (size_t i = 0; i < a->rankcomms.cap; i++) {
        struct audit_rankcomm *rc = hmap_slot(&a->rankcomms, i);
        if (!rc)
            continue;
        struct audit_comm *cm = audit_comm_get(a, rc->k.comm, 0);
        if (!cm || cm->ref_rank == rc->k.rank)
            continue;
        struct audit_rankcomm_key rk;
        memset(&rk, 0, sizeof rk);
        rk.comm = rc->k.comm;
        rk.rank = cm->ref_rank;
        struct audit_rankcomm *ref = hmap_get(&a->rankcomms, &rk, 0);
        if (!ref || ref->max_seq == rc->max_seq)
            continue;
        uint64_t end = (ref->max_seq < rc->max_seq ? ref->max_seq : rc->max_seq) + 1;
        if (rc->first_diff == 0 || end < rc->first_diff) {
            rc->first_diff = end;
            rc->first_diff_step = ref->max_seq < rc->max_seq ? rc->max_seq_step : ref->max_seq_step;
        }
    }
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
    finish_first_diffs(a);
    audit_time_finish(a);
    return n;
}
