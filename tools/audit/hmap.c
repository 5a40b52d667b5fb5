/* hmap.c - open-addressing hash map (see hmap.h). */
#include "hmap.h"
#include <stdlib.h>
#include <string.h>

void hmap_init(struct hmap *m, size_t esize, size_t ksize)
{
    memset(m, 0, sizeof *m);
    m->esize = esize;
    m->ksize = ksize;
}

void hmap_free(struct hmap *m)
{
    free(m->slots);
    free(m->used);
    m->slots = m->used = NULL;
    m->cap = m->n = 0;
}

/* FNV-1a over the key, then a final avalanche so low bits are usable. */
uint64_t hmap_hash(const void *p, size_t n)
{
    const unsigned char *b = p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 1099511628211ull;
    }
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return h;
}

static int grow(struct hmap *m)
{
    size_t ncap = m->cap ? m->cap * 2 : 64;
    unsigned char *ns = calloc(ncap, m->esize), *nu = calloc(ncap, 1);
    if (!ns || !nu) {
        free(ns);
        free(nu);
        return -1;
    }
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->used[i])
            continue;
        unsigned char *e = m->slots + i * m->esize;
        size_t j = hmap_hash(e, m->ksize) & (ncap - 1);
        while (nu[j])
            j = (j + 1) & (ncap - 1);
        nu[j] = 1;
        memcpy(ns + j * m->esize, e, m->esize);
    }
    free(m->slots);
    free(m->used);
    m->slots = ns;
    m->used = nu;
    m->cap = ncap;
    return 0;
}

void *hmap_get(struct hmap *m, const void *key, int create)
{
    if (m->cap) {
        size_t j = hmap_hash(key, m->ksize) & (m->cap - 1);
        while (m->used[j]) {
            unsigned char *e = m->slots + j * m->esize;
            if (memcmp(e, key, m->ksize) == 0)
                return e;
            j = (j + 1) & (m->cap - 1);
        }
    }
    if (!create)
        return NULL;
    if ((m->n + 1) * 4 > m->cap * 3 && grow(m) != 0)
        return NULL;
    size_t j = hmap_hash(key, m->ksize) & (m->cap - 1);
    while (m->used[j])
        j = (j + 1) & (m->cap - 1);
    m->used[j] = 1;
    m->n++;
    unsigned char *e = m->slots + j * m->esize;
    memset(e, 0, m->esize);
    memcpy(e, key, m->ksize);
    return e;
}

void *hmap_slot(const struct hmap *m, size_t i)
{
    return m->used[i] ? m->slots + i * m->esize : NULL;
}

void **hmap_sorted(const struct hmap *m, int (*cmp)(const void *, const void *), size_t *n)
{
    void **v = malloc((m->n + 1) * sizeof *v);
    size_t k = 0;
    *n = 0;
    if (!v)
        return NULL;
    for (size_t i = 0; i < m->cap; i++) {
        void *e = hmap_slot(m, i);
        if (e)
            v[k++] = e;
    }
    qsort(v, k, sizeof *v, cmp);
    *n = k;
    return v;
}
