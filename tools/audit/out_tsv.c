/* out_tsv.c - --tsv: one line per (step, rank, comm, kind), for shell tests. */
#include "audit.h"
#include "ccs_kinds.h"
#include <inttypes.h>
#include <stdlib.h>

void out_tsv(struct audit *a, FILE *f)
{
    size_t n;
    struct audit_cell **v = audit_sorted_cells(a, &n);
    fprintf(f, "#step\trank\tcomm\tkind\tcount\tbytes\tdeferred\ttime_ns\n");
    for (size_t i = 0; i < n; i++) {
        const struct audit_cell *c = v[i];
        fprintf(f, "%u\t%d\t%016" PRIx64 "\t%s\t%" PRIu64 "\t%" PRIu64 "\t%u\t%" PRIu64 "\n", c->k.step,
                (int)c->k.rank, c->k.comm, ccs_kind_name(c->k.kind), c->count, c->bytes, c->k.deferred, c->time_ns);
    }
    free(v);
}
