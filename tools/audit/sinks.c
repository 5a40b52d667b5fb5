/*
 * sinks.c - ccshim-audit's outputs: the list of sink types that the command
 * line offers, and the calls the reader makes on the sinks chosen (audit.h
 * says when each is called).  Adding a format: a file defining its struct
 * audit_sink_type, and one line in the list below.
 */
#include "audit.h"
#include <stdlib.h>

extern const struct audit_sink_type audit_sink_json, audit_sink_tsv, audit_sink_tsv_time, audit_sink_tsv_records,
    audit_sink_chrome,
    audit_sink_html, audit_sink_otf2;

const struct audit_sink_type *const audit_sink_types[] = {
    &audit_sink_json, &audit_sink_tsv, &audit_sink_tsv_time, &audit_sink_tsv_records, &audit_sink_chrome,
    &audit_sink_html, &audit_sink_otf2, &audit_sink_table,       NULL,
};

int audit_sink_add(struct audit *a, const struct audit_sink_type *t, const char *arg)
{
    for (size_t i = 0; i < a->nsinks; i++)
        if (a->sinks[i].type == t) {
            a->sinks[i].arg = arg;
            return 0;
        }
    struct audit_sink *grown = realloc(a->sinks, (a->nsinks + 1) * sizeof *grown);
    if (!grown)
        return -1;
    a->sinks = grown;
    a->sinks[a->nsinks++] = (struct audit_sink){.type = t, .arg = arg, .a = a};
    return 0;
}

int audit_sinks_want(const struct audit *a, unsigned flag)
{
    for (size_t i = 0; i < a->nsinks; i++)
        if (a->sinks[i].type->flags & flag)
            return 1;
    return 0;
}

int audit_sinks_open(struct audit *a)
{
    for (size_t i = 0; i < a->nsinks; i++) {
        struct audit_sink *s = &a->sinks[i];
        if (s->type->open && s->type->open(s) != 0)
            return -1;
        s->opened = 1;
    }
    return 0;
}

void audit_sinks_rank_begin(struct audit *a, const struct audit_file *f)
{
    for (size_t i = 0; i < a->nsinks; i++)
        if (a->sinks[i].opened && a->sinks[i].type->rank_begin)
            a->sinks[i].type->rank_begin(&a->sinks[i], f);
}

void audit_sinks_comm(struct audit *a, const struct audit_file *f, const struct ccs_trace_comm *c)
{
    for (size_t i = 0; i < a->nsinks; i++)
        if (a->sinks[i].opened && a->sinks[i].type->comm)
            a->sinks[i].type->comm(&a->sinks[i], f, c);
}

void audit_sinks_record(struct audit *a, const struct audit_file *f, const struct ccs_record *r, uint32_t step,
                        uint32_t site)
{
    for (size_t i = 0; i < a->nsinks; i++)
        if (a->sinks[i].opened && a->sinks[i].type->record)
            a->sinks[i].type->record(&a->sinks[i], f, r, step, site);
}

void audit_sinks_rank_end(struct audit *a, const struct audit_file *f)
{
    for (size_t i = 0; i < a->nsinks; i++)
        if (a->sinks[i].opened && a->sinks[i].type->rank_end)
            a->sinks[i].type->rank_end(&a->sinks[i], f);
}

int audit_sinks_close(struct audit *a, int report)
{
    int rc = 0;
    for (size_t i = 0; i < a->nsinks; i++) {
        struct audit_sink *s = &a->sinks[i];
        if (!s->opened || !(s->type->flags & AUDIT_SINK_REPORT) != !report)
            continue;
        s->opened = 0;
        if (s->type->close && s->type->close(s) != 0)
            rc = -1;
    }
    return rc;
}

void audit_sinks_free(struct audit *a)
{
    for (size_t i = 0; i < a->nsinks; i++) {
        struct audit_sink *s = &a->sinks[i];
        if (s->opened && s->type->discard)
            s->type->discard(s);
    }
    free(a->sinks);
    a->sinks = NULL;
    a->nsinks = 0;
}
