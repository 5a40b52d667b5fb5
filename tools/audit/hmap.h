/*
 * hmap.h - open-addressing hash map of fixed-size entries whose first
 * KSIZE bytes are the key (callers zero keys before filling them, so
 * padding never differs).  Entry pointers move when the map grows.
 */
#ifndef CCS_AUDIT_HMAP_H
#define CCS_AUDIT_HMAP_H

#include <stddef.h>
#include <stdint.h>

struct hmap {
    size_t esize, ksize; /* entry and key sizes */
    size_t cap, n;       /* slots (power of two), entries */
    unsigned char *slots;
    unsigned char *used;
};

void hmap_init(struct hmap *m, size_t esize, size_t ksize);
void hmap_free(struct hmap *m);
/* The entry with KEY; when absent and CREATE, a new zeroed entry with KEY
 * copied in.  NULL when absent (or out of memory). */
void *hmap_get(struct hmap *m, const void *key, int create);
/* Entry in slot I, or NULL for an empty slot (iterate I < m->cap). */
void *hmap_slot(const struct hmap *m, size_t i);
/* Pointers to M's entries sorted by CMP (qsort's, on two pointers to
 * entries), *N of them; the caller frees; NULL (and *N 0) without memory. */
void **hmap_sorted(const struct hmap *m, int (*cmp)(const void *, const void *), size_t *n);
uint64_t hmap_hash(const void *p, size_t n);

#endif
