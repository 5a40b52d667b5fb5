/* expect.c - --expect KIND<=N[/comm|/step|/buffer]: limits for users' CI. */
#include "audit.h"
#include "ccs_kinds.h"
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

int audit_expect_parse(const char *s, struct audit_expect *e, char *err, size_t errlen)
{
    memset(e, 0, sizeof *e);
    snprintf(e->text, sizeof e->text, "%s", s);
    e->worst_rank = -1;
    const char *le = strstr(s, "<=");
    if (!le) {
        snprintf(err, errlen, "--expect '%s': expected KIND<=N[/comm|/step|/buffer], e.g. allreduce<=2", s);
        return -1;
    }
    char kind[64];
    size_t kl = (size_t)(le - s);
    if (kl == 0 || kl >= sizeof kind) {
        snprintf(err, errlen, "--expect '%s': missing kind before '<='", s);
        return -1;
    }
    memcpy(kind, s, kl);
    kind[kl] = 0;
    e->kind = ccs_kind_parse(kind);
    if (e->kind < 0 || ccs_kind_class(e->kind) == CCS_CLASS_MARK) {
        snprintf(err, errlen, "--expect '%s': unknown kind '%s' (expected a call kind such as allreduce)", s, kind);
        return -1;
    }
    char *end;
    const char *num = le + 2;
    if (*num < '0' || *num > '9') {
        snprintf(err, errlen, "--expect '%s': expected a number after '<='", s);
        return -1;
    }
    errno = 0;
    e->limit = strtoull(num, &end, 10);
    if (errno == ERANGE) {
        /* strtoull saturates: without this a limit past 2^64-1 was taken
         * as 18446744073709551615 (found by tests/fuzz/fuzz_expect.c). */
        snprintf(err, errlen, "--expect '%s': limit %.*s is larger than %llu", s, (int)strspn(num, "0123456789"),
                 num, (unsigned long long)UINT64_MAX);
        return -1;
    }
    if (*end == 0 || strcmp(end, "/comm") == 0)
        e->scope = EXPECT_COMM;
    else if (strcmp(end, "/step") == 0)
        e->scope = EXPECT_STEP;
    else if (strcmp(end, "/buffer") == 0)
        e->scope = EXPECT_BUFFER;
    else {
        snprintf(err, errlen, "--expect '%s': unknown scope '%s' (expected /comm, /step or /buffer)", s, end);
        return -1;
    }
    return 0;
}

static void note(struct audit_expect *e, uint64_t v, uint32_t step, int32_t rank, uint64_t comm)
{
    if (v > e->limit)
        e->violations++;
    if (v > e->worst || e->worst_rank < 0) {
        e->worst = v;
        e->worst_step = step;
        e->worst_rank = rank;
        e->worst_comm = comm;
    }
}

int audit_expect_check(struct audit *a)
{
    int failed = 0;
    for (size_t i = 0; i < a->nexpects; i++) {
        struct audit_expect *e = &a->expects[i];
        if (e->scope == EXPECT_COMM) {
            for (size_t j = 0; j < a->cells.cap; j++) {
                struct audit_cell *c = hmap_slot(&a->cells, j);
                if (c && c->k.kind == (uint32_t)e->kind && !c->k.deferred)
                    note(e, c->count, c->k.step, c->k.rank, c->k.comm);
            }
        } else if (e->scope == EXPECT_STEP) {
            struct sr {
                struct {
                    uint32_t step;
                    int32_t rank;
                } k;
                uint64_t n;
            };
            struct hmap m;
            hmap_init(&m, sizeof(struct sr), 8);
            for (size_t j = 0; j < a->cells.cap; j++) {
                struct audit_cell *c = hmap_slot(&a->cells, j);
                if (!c || c->k.kind != (uint32_t)e->kind || c->k.deferred)
                    continue;
                struct sr key = {{c->k.step, c->k.rank}, 0}, *s = hmap_get(&m, &key, 1);
                if (s)
                    s->n += c->count;
            }
            for (size_t j = 0; j < m.cap; j++) {
                struct sr *s = hmap_slot(&m, j);
                if (s)
                    note(e, s->n, s->k.step, s->k.rank, 0);
            }
            hmap_free(&m);
        } /* EXPECT_BUFFER was counted while reading (aggregate.c) */
        if (e->violations)
            failed++;
    }
    return failed;
}
