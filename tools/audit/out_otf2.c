/*
 * out_otf2.c - --otf2 DIR: an OTF2 archive (DIR/traces.otf2) for Vampir and
 * the Score-P tools.  One location per rank; one communicator definition
 * per communicator, its members ordered by their rank in it; per call an
 * Enter and a Leave of the call's region and, for a collective, a
 * collective begin and end event between them (the record's bytes as sent
 * and received, its root); each step a region "step" around its calls.
 * A call's Enter carries its call site: the name every other output gives
 * it (attribute "site") and its file and line as a source code location
 * (attribute "SOURCE_CODE_LOCATION", the name OTF2 documents for source
 * annotations of events).
 * Events stream out rank by rank; the definitions are written at the end.
 * Built only with OTF2 (configure: libotf2-trace-dev).
 */
#include "audit.h"
#include "ccs_kinds.h"
#include "config.h"
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#ifdef HAVE_OTF2
#define OTF2_HELP                                                                                                  \
    "  --otf2 DIR           also write an OTF2 archive, DIR/traces.otf2, for Vampir and Score-P tools\n"
#include <otf2/otf2.h>

#define UNKNOWN_RANK_LOCATION 1000000u                /* locations of traces of unknown rank count from here */
#define REGION_STEP 0u                                /* region keys: the step, */
#define NREGIONS (1u + CCS_BE_LIMIT * 2u * (CCS_KIND_MAX + 1u)) /* then (backend, kind, deferred) */
#define GROUP_MPI_LOCATIONS 0u                        /* the locations taking part in MPI communication */
#define GROUP_USER_LOCATIONS 1u                       /* ... in NCCL communication (no OTF2 paradigm of its own) */
#define GROUP_FIRST_COMM 2u
#define ATTR_STEP 0u
#define ATTR_SITE 1u /* string: the site's name, as every output gives it (audit_site_name) */
#define ATTR_SCL 2u  /* source code location: the call's file and line */

struct location {
    uint64_t id;
    int32_t rank;
    char host[128];
    uint64_t events;
};

struct comm_def {
    uint64_t id, parent;
    uint32_t ref;
    uint16_t backend;
    int32_t size;
    uint64_t *members; /* location index + 1 by rank in the communicator, 0 unknown */
};

struct comm_index {
    uint64_t id;
    uint32_t at; /* in otf2_out.comms */
};

/* A call site as the events refer to it, by its global index: the
 * references are given as events use it and defined at the end, when every
 * site is named. */
struct site_refs {
    uint32_t name; /* its name's string reference + 1, 0 while unused */
    uint32_t scl;  /* its source code location's reference + 1, 0 none */
};

struct otf2_out {
    OTF2_Archive *archive;
    OTF2_EvtWriter *evt;
    OTF2_AttributeList *attrs;
    struct location *locs;
    size_t nlocs;
    struct comm_def *comms;
    size_t ncomms;
    struct hmap comm_by_id;        /* struct comm_index */
    uint32_t region_ref[NREGIONS]; /* by key: the region's reference + 1, 0 while unused */
    uint32_t region_key[NREGIONS]; /* by reference: its key (references are dense, in order of use) */
    uint32_t nregions;
    struct site_refs *sites; /* by global site index - 1 */
    size_t sites_cap;
    uint32_t *site_order; /* the sites used, by their name's string reference */
    uint32_t nsite_names, nscls;
    uint64_t t_min, t_max;
    /* the rank being read */
    uint64_t t_last; /* its last event's time: a rank's events never go back in time */
    int in_step;
    uint32_t step;
    uint64_t next_unknown;
    uint32_t nstrings; /* string definitions written so far */
};

static OTF2_FlushType pre_flush(void *user, OTF2_FileType type, OTF2_LocationRef loc, void *caller, bool final)
{
    (void)user, (void)type, (void)loc, (void)caller, (void) final;
    return OTF2_FLUSH;
}

static OTF2_TimeStamp post_flush(void *user, OTF2_FileType type, OTF2_LocationRef loc)
{
    (void)user, (void)type, (void)loc;
    return 0;
}

static const OTF2_FlushCallbacks flush_callbacks = {pre_flush, post_flush};

static void otf2_state_free(struct otf2_out *o)
{
    for (size_t i = 0; i < o->ncomms; i++)
        free(o->comms[i].members);
    free(o->comms);
    free(o->locs);
    free(o->sites);
    free(o->site_order);
    hmap_free(&o->comm_by_id);
    if (o->attrs)
        OTF2_AttributeList_Delete(o->attrs);
    free(o);
}

static int otf2_open(struct audit_sink *s)
{
    struct otf2_out *o = calloc(1, sizeof *o);
    if (!o)
        return -1;
    hmap_init(&o->comm_by_id, sizeof(struct comm_index), sizeof(uint64_t));
    o->t_min = UINT64_MAX;
    o->next_unknown = UNKNOWN_RANK_LOCATION;
    o->attrs = OTF2_AttributeList_New();
    o->archive = OTF2_Archive_Open(s->arg, "traces", OTF2_FILEMODE_WRITE, 1024 * 1024, 4 * 1024 * 1024,
                                   OTF2_SUBSTRATE_POSIX, OTF2_COMPRESSION_NONE);
    if (!o->archive || !o->attrs ||
        OTF2_Archive_SetFlushCallbacks(o->archive, &flush_callbacks, NULL) != OTF2_SUCCESS ||
        OTF2_Archive_SetSerialCollectiveCallbacks(o->archive) != OTF2_SUCCESS ||
        OTF2_Archive_SetCreator(o->archive, "ccshim-audit " PACKAGE_VERSION) != OTF2_SUCCESS ||
        OTF2_Archive_OpenEvtFiles(o->archive) != OTF2_SUCCESS) {
        fprintf(stderr, "ccshim-audit: %s: cannot write the OTF2 archive %s/traces.otf2 (it must not exist yet)\n",
                s->arg, s->arg);
        if (o->archive)
            OTF2_Archive_Close(o->archive);
        otf2_state_free(o);
        return -1;
    }
    s->state = o;
    return 0;
}

static void otf2_rank_begin(struct audit_sink *s, const struct audit_file *f)
{
    struct otf2_out *o = s->state;
    struct location *grown = realloc(o->locs, (o->nlocs + 1) * sizeof *grown);
    if (!grown)
        return;
    o->locs = grown;
    struct location *l = &o->locs[o->nlocs++];
    memset(l, 0, sizeof *l);
    l->rank = f->rank;
    l->id = f->rank >= 0 ? (uint64_t)f->rank : o->next_unknown++;
    o->evt = OTF2_Archive_GetEvtWriter(o->archive, l->id);
    o->t_last = 0;
    o->in_step = 0;
}

/* The communicator ID's definition, made when first seen. */
static struct comm_def *comm_of(struct otf2_out *o, uint64_t id)
{
    struct comm_index *ix = hmap_get(&o->comm_by_id, &id, 0);
    if (ix)
        return &o->comms[ix->at];
    struct comm_def *grown = realloc(o->comms, (o->ncomms + 1) * sizeof *grown);
    if (!grown)
        return NULL;
    o->comms = grown;
    ix = hmap_get(&o->comm_by_id, &id, 1);
    if (!ix)
        return NULL;
    ix->at = (uint32_t)o->ncomms;
    struct comm_def *c = &o->comms[o->ncomms++];
    memset(c, 0, sizeof *c);
    c->id = id;
    c->ref = ix->at;
    c->size = -1;
    return c;
}

/* This rank's place in the communicator. */
static void otf2_comm(struct audit_sink *s, const struct audit_file *f, const struct ccs_trace_comm *tc)
{
    (void)f;
    struct otf2_out *o = s->state;
    struct comm_def *c = o->nlocs ? comm_of(o, tc->id) : NULL;
    if (!c)
        return;
    c->parent = tc->parent;
    c->backend = tc->backend;
    if (tc->size > 0 && tc->size <= (1 << 24) && !c->members) {
        c->members = calloc((size_t)tc->size, sizeof *c->members);
        c->size = c->members ? tc->size : -1;
    }
    if (c->members && tc->size == c->size && tc->rank >= 0 && tc->rank < c->size)
        c->members[tc->rank] = o->nlocs; /* the location being read, + 1 */
}

/* A time on this rank's location: never before its previous event. */
static uint64_t at(struct otf2_out *o, const struct audit_file *f, uint64_t t_rank)
{
    uint64_t t = f->start_realtime_ns + t_rank;
    if (t < o->t_last)
        t = o->t_last;
    o->t_last = t;
    if (t < o->t_min)
        o->t_min = t;
    if (t > o->t_max)
        o->t_max = t;
    return t;
}

/* The reference of the region with KEY, given when first used. */
static OTF2_RegionRef region(struct otf2_out *o, uint32_t key)
{
    if (!o->region_ref[key]) {
        o->region_key[o->nregions] = key;
        o->region_ref[key] = ++o->nregions;
    }
    return o->region_ref[key] - 1;
}

/* The key of R's region: its backend, kind and whether it was deferred. */
static uint32_t region_key(const struct ccs_record *r)
{
    unsigned kind = r->kind <= CCS_KIND_MAX ? r->kind : 0;
    unsigned backend = r->backend < CCS_BE_LIMIT ? r->backend : 0;
    return 1u + (backend * (CCS_KIND_MAX + 1u) + kind) * 2u + ((r->flags & CCS_F_DEFERRED) != 0);
}

/* OTF2's type of a collective of KIND: the kinds table's otf2 column
 * (ccs_kinds.h); a kind that is not a collective says NONE there, which
 * OTF2 has no name for, and is never asked (otf2_record writes collective
 * events for collectives only). */
#define OTF2_OP_OF_0(t) OTF2_COLLECTIVE_OP_##t
#define OTF2_OP_OF_1(t) OTF2_UNDEFINED_UINT8
#define OTF2_OP_OF_(none, t) OTF2_OP_OF_##none(t)
#define OTF2_OP_OF(none, t) OTF2_OP_OF_(none, t)
static OTF2_CollectiveOp collective_op(unsigned kind)
{
    switch (kind) {
#define CCS_X(e, n, s, c, cnt, sig, bytes, op, root, types, otf2, inpl)                                            \
    case n:                                                                                                        \
        return OTF2_OP_OF(CCS_KIND_IS_NONE(otf2), otf2);
        CCS_KIND_LIST(CCS_X)
#undef CCS_X
    }
    return OTF2_UNDEFINED_UINT8;
}

/* SITE's references (a global site index), given when first used; NULL
 * for no site, or out of memory (the call is then written without it). */
static const struct site_refs *site_refs(struct otf2_out *o, const struct audit *a, uint32_t site)
{
    if (!site || site > a->nsites)
        return NULL;
    if (site > o->sites_cap) {
        size_t cap = a->nsites > 2 * o->sites_cap ? a->nsites : 2 * o->sites_cap;
        struct site_refs *grown = realloc(o->sites, cap * sizeof *grown);
        uint32_t *order = realloc(o->site_order, cap * sizeof *order);
        if (grown)
            o->sites = grown;
        if (order)
            o->site_order = order;
        if (!grown || !order)
            return NULL;
        memset(o->sites + o->sites_cap, 0, (cap - o->sites_cap) * sizeof *grown);
        o->sites_cap = cap;
    }
    struct site_refs *r = &o->sites[site - 1];
    if (!r->name) {
        char file[8]; /* only whether it has a line: the file is written with the definitions */
        uint32_t line;
        o->site_order[o->nsite_names] = site;
        r->name = ++o->nsite_names;
        if (audit_site_source(a->site_list[site - 1], file, sizeof file, &line))
            r->scl = ++o->nscls;
    }
    return r;
}

static void leave_step(struct otf2_out *o)
{
    if (!o->in_step)
        return;
    OTF2_EvtWriter_Leave(o->evt, NULL, o->t_last, region(o, REGION_STEP));
    o->locs[o->nlocs - 1].events++;
    o->in_step = 0;
}

/* Step marks are not written: a step is the span of its calls. */
static void otf2_record(struct audit_sink *s, const struct audit_file *f, const struct ccs_record *r, uint32_t step,
                        uint32_t site)
{
    struct otf2_out *o = s->state;
    if (!o->evt || ccs_kind_class(r->kind) == CCS_CLASS_MARK)
        return;
    struct location *l = &o->locs[o->nlocs - 1];
    if (o->in_step && step != o->step)
        leave_step(o);
    uint64_t t0 = at(o, f, r->t_start);
    if (!o->in_step) {
        OTF2_AttributeList_AddUint32(o->attrs, ATTR_STEP, step);
        OTF2_EvtWriter_Enter(o->evt, o->attrs, t0, region(o, REGION_STEP));
        o->in_step = 1;
        o->step = step;
        l->events++;
    }
    OTF2_RegionRef call = region(o, region_key(r));
    const struct site_refs *sr = site_refs(o, s->a, site);
    if (sr) {
        OTF2_AttributeList_AddStringRef(o->attrs, ATTR_SITE, sr->name - 1);
        if (sr->scl)
            OTF2_AttributeList_AddSourceCodeLocationRef(o->attrs, ATTR_SCL, sr->scl - 1);
    }
    OTF2_EvtWriter_Enter(o->evt, sr ? o->attrs : NULL, t0, call);
    l->events++;
    if (ccs_kind_class(r->kind) == CCS_CLASS_COLL) {
        struct comm_def *c = comm_of(o, r->comm);
        OTF2_EvtWriter_MpiCollectiveBegin(o->evt, NULL, t0);
        uint64_t t1 = at(o, f, r->t_start + r->t_dur);
        OTF2_EvtWriter_MpiCollectiveEnd(o->evt, NULL, t1, collective_op(r->kind), c ? c->ref : OTF2_UNDEFINED_COMM,
                                        r->root >= 0 ? (uint32_t)r->root : OTF2_COLLECTIVE_ROOT_NONE, r->bytes,
                                        r->bytes);
        l->events += 2;
    }
    OTF2_EvtWriter_Leave(o->evt, NULL, at(o, f, r->t_start + r->t_dur), call);
    l->events++;
}

static void otf2_rank_end(struct audit_sink *s, const struct audit_file *f)
{
    struct otf2_out *o = s->state;
    if (!o->evt)
        return;
    leave_step(o);
    OTF2_Archive_CloseEvtWriter(o->archive, o->evt);
    o->evt = NULL;
    snprintf(o->locs[o->nlocs - 1].host, sizeof o->locs[o->nlocs - 1].host, "%s", f->host);
}

/* Writes string S as the next string definition; returns its reference. */
static OTF2_StringRef string(struct otf2_out *o, OTF2_GlobalDefWriter *w, const char *s)
{
    OTF2_GlobalDefWriter_WriteString(w, o->nstrings, s);
    return o->nstrings++;
}

/* The paradigm of BACKEND (the backends table's otf2 column); MPI's for
 * a number the table does not list (the reader refuses such records; a
 * communicator's entry keeps what it was given before the table). */
static OTF2_Paradigm paradigm(unsigned backend)
{
    switch (backend) {
#define CCS_X(e, n, s, p)                                                                                          \
    case n:                                                                                                        \
        return OTF2_PARADIGM_##p;
        CCS_BACKEND_LIST(CCS_X)
#undef CCS_X
    }
    return OTF2_PARADIGM_MPI;
}

/* The region role of KIND: a collective's from its OTF2 type (one to all,
 * all to one, barrier, else all to all). */
static OTF2_RegionRole region_role(unsigned kind)
{
    switch (ccs_kind_class(kind)) {
    case CCS_CLASS_COLL:
        break;
    case CCS_CLASS_P2P:
        return OTF2_REGION_ROLE_POINT2POINT;
    default:
        return OTF2_REGION_ROLE_FUNCTION;
    }
    switch (collective_op(kind)) {
    case OTF2_COLLECTIVE_OP_BCAST:
    case OTF2_COLLECTIVE_OP_SCATTER:
    case OTF2_COLLECTIVE_OP_SCATTERV:
        return OTF2_REGION_ROLE_COLL_ONE2ALL;
    case OTF2_COLLECTIVE_OP_REDUCE:
    case OTF2_COLLECTIVE_OP_GATHER:
    case OTF2_COLLECTIVE_OP_GATHERV:
        return OTF2_REGION_ROLE_COLL_ALL2ONE;
    case OTF2_COLLECTIVE_OP_BARRIER:
        return OTF2_REGION_ROLE_BARRIER;
    default:
        return OTF2_REGION_ROLE_COLL_ALL2ALL;
    }
}

static void write_regions(struct otf2_out *o, OTF2_GlobalDefWriter *w)
{
    OTF2_StringRef none = string(o, w, "");
    for (uint32_t ref = 0; ref < o->nregions; ref++) {
        uint32_t key = o->region_key[ref];
        if (key == REGION_STEP) {
            OTF2_StringRef name = string(o, w, "step");
            OTF2_GlobalDefWriter_WriteRegion(w, ref, name, name, string(o, w, "an optimizer step (ccshim)"),
                                             OTF2_REGION_ROLE_CODE, OTF2_PARADIGM_USER, OTF2_REGION_FLAG_NONE, none,
                                             0, 0);
            continue;
        }
        unsigned deferred = (key - 1) % 2, kind = (key - 1) / 2 % (CCS_KIND_MAX + 1);
        unsigned backend = (key - 1) / 2 / (CCS_KIND_MAX + 1);
        char label[64], canonical[96];
        kind_label(kind, (int)deferred, label, sizeof label);
        snprintf(canonical, sizeof canonical, "%s %s", ccs_backend_name(backend), label);
        OTF2_GlobalDefWriter_WriteRegion(w, ref, string(o, w, label), string(o, w, canonical), none,
                                         region_role(kind), paradigm(backend), OTF2_REGION_FLAG_NONE, none, 0, 0);
    }
}

static void write_locations(struct otf2_out *o, OTF2_GlobalDefWriter *w)
{
    OTF2_StringRef machine = string(o, w, "job");
    OTF2_GlobalDefWriter_WriteSystemTreeNode(w, 0, machine, string(o, w, "machine"),
                                             OTF2_UNDEFINED_SYSTEM_TREE_NODE);
    for (size_t i = 0; i < o->nlocs; i++) {
        char name[200];
        if (o->locs[i].rank >= 0)
            snprintf(name, sizeof name, "rank %d%s%.128s", (int)o->locs[i].rank, o->locs[i].host[0] ? " " : "",
                     o->locs[i].host);
        else
            snprintf(name, sizeof name, "unknown rank %zu", i);
        OTF2_StringRef sname = string(o, w, name);
        OTF2_GlobalDefWriter_WriteLocationGroup(w, (OTF2_LocationGroupRef)i, sname,
                                                OTF2_LOCATION_GROUP_TYPE_PROCESS, 0, OTF2_UNDEFINED_LOCATION_GROUP);
        OTF2_GlobalDefWriter_WriteLocation(w, o->locs[i].id, sname, OTF2_LOCATION_TYPE_CPU_THREAD,
                                           o->locs[i].events, (OTF2_LocationGroupRef)i);
    }
}

/* The groups of locations taking part in communication (one per paradigm,
 * a communicator's members are positions in it), then per communicator
 * the group of its members by rank in it, and its definition. */
static int write_comms(struct otf2_out *o, OTF2_GlobalDefWriter *w, struct audit *a)
{
    uint64_t *members = malloc((o->nlocs + 1) * sizeof *members);
    if (!members)
        return -1;
    for (size_t i = 0; i < o->nlocs; i++)
        members[i] = o->locs[i].id;
    OTF2_GlobalDefWriter_WriteGroup(w, GROUP_MPI_LOCATIONS, string(o, w, "MPI ranks"),
                                    OTF2_GROUP_TYPE_COMM_LOCATIONS, OTF2_PARADIGM_MPI, OTF2_GROUP_FLAG_NONE,
                                    (uint32_t)o->nlocs, members);
    OTF2_GlobalDefWriter_WriteGroup(w, GROUP_USER_LOCATIONS, string(o, w, "NCCL ranks"),
                                    OTF2_GROUP_TYPE_COMM_LOCATIONS, OTF2_PARADIGM_USER, OTF2_GROUP_FLAG_NONE,
                                    (uint32_t)o->nlocs, members);
    for (size_t i = 0; i < o->ncomms; i++) {
        const struct comm_def *c = &o->comms[i];
        uint32_t n = 0;
        for (int32_t k = 0; k < c->size; k++)
            if (c->members[k] && n < o->nlocs)
                members[n++] = c->members[k] - 1;
        if (!c->members) { /* no description in any trace: the ranks the reader saw on it */
            const struct audit_comm *ac = audit_comm_get(a, c->id, 0);
            for (size_t k = 0; ac && k < ac->nmembers; k++)
                for (size_t j = 0; j < o->nlocs; j++)
                    if (o->locs[j].rank == ac->members[k] && n < o->nlocs)
                        members[n++] = j;
        }
        char name[96];
        snprintf(name, sizeof name, "%s comm %016" PRIx64, ccs_backend_name(c->backend), c->id);
        OTF2_StringRef sname = string(o, w, name);
        OTF2_GlobalDefWriter_WriteGroup(w, GROUP_FIRST_COMM + c->ref, sname, OTF2_GROUP_TYPE_COMM_GROUP,
                                        paradigm(c->backend), OTF2_GROUP_FLAG_NONE, n, members);
        struct comm_index *parent = c->parent ? hmap_get(&o->comm_by_id, &c->parent, 0) : NULL;
        OTF2_GlobalDefWriter_WriteComm(w, c->ref, sname, GROUP_FIRST_COMM + c->ref,
                                       parent ? parent->at : OTF2_UNDEFINED_COMM, OTF2_COMM_FLAG_NONE);
    }
    free(members);
    return 0;
}

/* A source file's name, written once as a string. */
struct file_string {
    uint64_t hash; /* of the name */
    uint32_t site; /* the first site in it (its global index), whose name it is */
    uint32_t ref;
};

/* The sites' names, as string references 0 to nsite_names - 1 (the events
 * refer to them so), and their source code locations, each file named once. */
static void write_sites(struct otf2_out *o, OTF2_GlobalDefWriter *w, struct audit *a)
{
    char name[1024], file[1024], other[1024];
    uint32_t line, other_line;
    struct hmap files;
    hmap_init(&files, sizeof(struct file_string), sizeof(uint64_t));
    for (uint32_t i = 0; i < o->nsite_names; i++)
        string(o, w, audit_site_name(a->site_list[o->site_order[i] - 1], name, sizeof name));
    for (uint32_t i = 0; i < o->nsite_names; i++) {
        const struct audit_site *st = a->site_list[o->site_order[i] - 1];
        const struct site_refs *r = &o->sites[o->site_order[i] - 1];
        if (!r->scl || !audit_site_source(st, file, sizeof file, &line))
            continue;
        uint64_t h = hmap_hash(file, strlen(file));
        struct file_string *fs = hmap_get(&files, &h, 1);
        OTF2_StringRef ref;
        if (fs && fs->site && audit_site_source(a->site_list[fs->site - 1], other, sizeof other, &other_line) &&
            strcmp(other, file) == 0) {
            ref = fs->ref;
        } else { /* new (or a hash shared with another name: written again) */
            ref = string(o, w, file);
            if (fs && !fs->site) {
                fs->site = o->site_order[i];
                fs->ref = ref;
            }
        }
        OTF2_GlobalDefWriter_WriteSourceCodeLocation(w, r->scl - 1, ref, line);
    }
    hmap_free(&files);
}

static int write_definitions(struct otf2_out *o, struct audit *a)
{
    OTF2_GlobalDefWriter *w = OTF2_Archive_GetGlobalDefWriter(o->archive);
    if (!w)
        return -1;
    uint64_t t_min = o->t_min == UINT64_MAX ? 0 : o->t_min;
    OTF2_GlobalDefWriter_WriteClockProperties(w, 1000000000, t_min, o->t_max - t_min, t_min);
    write_sites(o, w, a); /* the first strings: the events' references are theirs */
    OTF2_GlobalDefWriter_WriteAttribute(w, ATTR_STEP, string(o, w, "step"),
                                        string(o, w, "the step number (ccshim step markers or inferred steps)"),
                                        OTF2_TYPE_UINT32);
    OTF2_GlobalDefWriter_WriteAttribute(w, ATTR_SITE, string(o, w, "site"),
                                        string(o, w, "the call site, as ccshim-audit's other outputs name it"),
                                        OTF2_TYPE_STRING);
    OTF2_GlobalDefWriter_WriteAttribute(w, ATTR_SCL, string(o, w, "SOURCE_CODE_LOCATION"),
                                        string(o, w, "the call's file and line"), OTF2_TYPE_SOURCE_CODE_LOCATION);
    write_regions(o, w);
    write_locations(o, w);
    return write_comms(o, w, a);
}

static int otf2_close(struct audit_sink *s)
{
    struct otf2_out *o = s->state;
    int rc = OTF2_Archive_CloseEvtFiles(o->archive) == OTF2_SUCCESS ? 0 : -1;
    /* Every location has its (empty) local definitions. */
    if (rc == 0 && OTF2_Archive_OpenDefFiles(o->archive) == OTF2_SUCCESS) {
        for (size_t i = 0; i < o->nlocs; i++) {
            OTF2_DefWriter *d = OTF2_Archive_GetDefWriter(o->archive, o->locs[i].id);
            if (d)
                OTF2_Archive_CloseDefWriter(o->archive, d);
        }
        rc = OTF2_Archive_CloseDefFiles(o->archive) == OTF2_SUCCESS ? 0 : -1;
    } else {
        rc = -1;
    }
    if (rc == 0)
        rc = write_definitions(o, s->a);
    if (OTF2_Archive_Close(o->archive) != OTF2_SUCCESS)
        rc = -1;
    if (rc != 0)
        fprintf(stderr, "ccshim-audit: %s/traces.otf2: write failed\n", s->arg);
    otf2_state_free(o);
    s->state = NULL;
    return rc;
}

static void otf2_discard(struct audit_sink *s)
{
    struct otf2_out *o = s->state;
    OTF2_Archive_Close(o->archive);
    otf2_state_free(o);
    s->state = NULL;
}

const struct audit_sink_type audit_sink_otf2 = {
    .option = "otf2",
    .arg = "DIR",
    .help = OTF2_HELP,
    .open = otf2_open,
    .rank_begin = otf2_rank_begin,
    .comm = otf2_comm,
    .record = otf2_record,
    .rank_end = otf2_rank_end,
    .close = otf2_close,
    .discard = otf2_discard,
};

#else /* !HAVE_OTF2 */

#define OTF2_HELP "  --otf2 DIR           an OTF2 archive for Vampir (not in this build: configure found no OTF2)\n"

static int otf2_unavailable(struct audit_sink *s)
{
    fprintf(stderr,
            "ccshim-audit: --otf2 %s: this ccshim-audit was built without OTF2 (install libotf2-trace-dev, "
            "run configure again and rebuild)\n",
            s->arg);
    return -1;
}

const struct audit_sink_type audit_sink_otf2 = {
    .option = "otf2",
    .arg = "DIR",
    .help = OTF2_HELP,
    .open = otf2_unavailable,
};

#endif
