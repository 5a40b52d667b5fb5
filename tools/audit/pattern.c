/*
 * pattern.c - compresses a step's call sequence into a readable pattern:
 * "[allreduce 25.0 MiB @buf0, allreduce 9.7 MiB @buf1] x32, allgather 8 B".
 * Greedy, left to right: at each position take the block that, repeated
 * back to back, covers the most calls (the shortest block on a tie), and
 * compress its inside the same way.
 */
#include "audit.h"
#include <stdlib.h>
#include <string.h>

#define MAX_BLOCK 256    /* longest repeating block looked for */
#define MAX_PATTERN 4000 /* characters; longer patterns end with "..." */

struct sbuf {
    char *s;
    size_t n, cap;
    int full, oom;
};

static void put(struct sbuf *b, const char *t)
{
    size_t l = strlen(t);
    if (b->full || b->oom)
        return;
    if (b->n + l + 4 > MAX_PATTERN) {
        l = 0;
        t = "";
        b->full = 1;
    }
    if (b->n + l + 5 > b->cap) {
        size_t nc = (b->n + l + 5) * 2;
        char *ns = realloc(b->s, nc);
        if (!ns) {
            b->oom = 1;
            return;
        }
        b->s = ns;
        b->cap = nc;
    }
    memcpy(b->s + b->n, t, l);
    b->n += l;
    if (b->full) {
        memcpy(b->s + b->n, "...", 3);
        b->n += 3;
    }
    b->s[b->n] = 0;
}

/* Times tok[i..i+len) occurs back to back from i. */
static size_t repeats(const uint32_t *tok, size_t n, size_t i, size_t len)
{
    size_t r = 1;
    while (i + (r + 1) * len <= n && memcmp(tok + i, tok + i + r * len, len * sizeof *tok) == 0)
        r++;
    return r;
}

static void compress(struct sbuf *b, const uint32_t *tok, size_t n, const char *(*label)(uint32_t, void *),
                     void *arg)
{
    size_t i = 0;
    int first = 1;
    while (i < n && !b->full && !b->oom) {
        size_t best_len = 1, best_rep = 1;
        size_t maxl = (n - i) / 2;
        if (maxl > MAX_BLOCK)
            maxl = MAX_BLOCK;
        for (size_t len = 1; len <= maxl; len++) {
            size_t r = repeats(tok, n, i, len);
            if (r >= 2 && len * r > best_len * best_rep)
                best_len = len, best_rep = r;
        }
        if (!first)
            put(b, ", ");
        first = 0;
        if (best_rep == 1) {
            put(b, label(tok[i], arg));
            i++;
            continue;
        }
        char rep[32];
        snprintf(rep, sizeof rep, " x%zu", best_rep);
        if (best_len == 1) {
            put(b, label(tok[i], arg));
        } else {
            put(b, "[");
            compress(b, tok + i, best_len, label, arg);
            put(b, "]");
        }
        put(b, rep);
        i += best_len * best_rep;
    }
}

char *audit_compress(const uint32_t *tok, size_t n, const char *(*label)(uint32_t, void *), void *arg)
{
    struct sbuf b = {0};
    put(&b, "");
    compress(&b, tok, n, label, arg);
    if (b.oom) {
        free(b.s);
        return NULL;
    }
    return b.s;
}
