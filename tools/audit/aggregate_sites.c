/*
 * aggregate_sites.c - the audit reader's call sites: the modules, Python sites and
 * sites a trace describes, interned into the audit's global sites (one per
 * frames and Python line, whichever rank's file names it).
 */
#include "aggregate.h"
#include "ccs_kinds.h"
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void agg_on_module(struct file_reading *rd, uint32_t id, const char *path)
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

void agg_on_pysite(struct file_reading *rd, uint32_t id, const char *text)
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

void agg_on_site(struct file_reading *rd, const struct ccs_item *it)
{
    struct audit *a = rd->a;
    uint32_t id = it->u.site.id, depth = it->u.site.depth;
    agg_note_id(rd, &rd->site_ids, id, 1);
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

/* The global site index of R (0: none), as reached from its Python site if any. */
uint32_t agg_record_site(struct file_reading *rd, const struct ccs_record *r)
{
    uint32_t site = r->site < rd->site_map_n ? rd->site_map[r->site] : 0;
    if (r->pysite)
        site = site_with_pysite(rd, site, r->pysite);
    return site;
}
