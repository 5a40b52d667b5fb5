/* out_json.c - --json: the whole audit as one JSON document (schema in
 * docs/audit.md; "version" changes when a field changes meaning). */
#include "audit.h"
#include "ccs_kinds.h"
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static const char *status_name(int s)
{
    static const char *n[] = {"ok", "truncated", "damaged", "refused"};
    return s >= 0 && s < 4 ? n[s] : "?";
}

static void files(struct audit *a, FILE *f)
{
    static const char *reason[] = {"flush", "finalize", "exit", "signal"};
    fprintf(f, "\"files\":[");
    for (size_t i = 0; i < a->nfiles; i++) {
        const struct audit_file *x = &a->files[i];
        fprintf(f, "%s\n{\"path\":", i ? "," : "");
        json_str(f, x->path);
        fprintf(f, ",\"status\":\"%s\",\"error\":", status_name(x->status));
        if (x->error)
            json_str(f, x->error);
        else
            fputs("null", f);
        fprintf(f, ",\"rank\":%d,\"size\":%d,\"pid\":%u,\"host\":", (int)x->rank, (int)x->size, x->pid);
        json_str(f, x->host);
        fputs(",\"job\":", f);
        json_str(f, x->job);
        fputs(",\"exe\":", f);
        json_str(f, x->exe);
        fprintf(f, ",\"records\":%" PRIu64 ",\"last_step\":%u,\"end\":", x->records, x->last_step);
        if (x->has_end)
            fprintf(f,
                    "{\"reason\":\"%s\",\"signal\":%d,\"records\":%" PRIu64 ",\"dropped\":%" PRIu64
                    ",\"steps\":%" PRIu64 "}",
                    x->end.reason >= 0 && x->end.reason < 4 ? reason[x->end.reason] : "?", (int)x->end.signo,
                    (uint64_t)x->end.records, (uint64_t)x->end.dropped, (uint64_t)x->end.steps);
        else
            fputs("null", f);
        fputc('}', f);
    }
    fputs("],\n", f);
}

static void comms(struct audit *a, FILE *f)
{
    fprintf(f, "\"comms\":[");
    for (size_t i = 0; i < a->ncomms; i++) {
        const struct audit_comm *c = &a->comms[i];
        /* created_by null: not seen created (a constructor ccshim does not
         * intercept; each rank counts it under an id of its own). */
        fprintf(f,
                "%s\n{\"id\":\"%016" PRIx64 "\",\"parent\":\"%016" PRIx64 "\",\"size\":%d,\"backend\":\"%s\","
                "\"created_by\":%s%s%s,\"color\":%d}",
                i ? "," : "", c->id, c->parent, (int)c->size, ccs_backend_name(c->backend), c->how ? "\"" : "",
                c->how ? ccs_kind_name(c->how) : "null", c->how ? "\"" : "", (int)c->color);
    }
    fputs("],\n", f);
}

static void step_comms(struct audit *a, FILE *f, uint32_t step, struct audit_stepcomm **sc, size_t nsc, size_t *j)
{
    fputs("],\"comms\":[", f);
    int first = 1;
    while (*j < nsc && sc[*j]->k.step < step)
        (*j)++;
    /* every comm that has cells in the step is in the stepcomms or the outliers */
    for (size_t ci = 0; ci < a->ncomms; ci++) {
        uint64_t comm = a->comms[ci].id;
        int32_t out[64];
        size_t k = audit_step_outliers(a, step, comm, out, 64);
        const struct audit_stepcomm *s = NULL;
        for (size_t m = *j; m < nsc && sc[m]->k.step == step; m++)
            if (sc[m]->k.comm == comm)
                s = sc[m];
        if (!s && !k)
            continue;
        fprintf(f, "%s{\"comm\":\"%016" PRIx64 "\",\"pattern\":", first ? "" : ",", comm);
        first = 0;
        if (s && s->pattern)
            json_str(f, s->pattern);
        else
            fputs("null", f);
        fprintf(f, ",\"pattern_rank\":%d,\"max_reductions_per_buffer\":%u,\"buffers_reduced_repeatedly\":%u",
                (int)a->ref_rank, s ? s->all.max_k : 0, s ? s->all.repeated_bufs : 0);
        fputs(",\"differing_ranks\":[", f);
        for (size_t m = 0; m < k && m < 64; m++)
            fprintf(f, "%s%d", m ? "," : "", (int)out[m]);
        fputs("]}", f);
    }
    while (*j < nsc && sc[*j]->k.step <= step)
        (*j)++;
}

static void steps(struct audit *a, FILE *f)
{
    size_t n, nsc, j = 0;
    struct audit_cell **v = audit_sorted_cells(a, &n);
    struct audit_stepcomm **sc = audit_sorted_stepcomms(a, &nsc);
    fputs("\"steps\":[", f);
    for (size_t i = 0; v && i < n;) {
        uint32_t step = v[i]->k.step;
        fprintf(f, "%s\n{\"step\":%u,\"ranks\":[", i ? "]}," : "", step);
        int first_rank = 1;
        while (i < n && v[i]->k.step == step) {
            int32_t rank = v[i]->k.rank;
            fprintf(f, "%s\n {\"rank\":%d,\"comms\":[", first_rank ? "" : ",", (int)rank);
            first_rank = 0;
            int first_comm = 1;
            while (i < n && v[i]->k.step == step && v[i]->k.rank == rank) {
                uint64_t comm = v[i]->k.comm;
                const struct audit_comm *ac = audit_comm_get(a, comm, 0);
                fprintf(f, "%s{\"comm\":\"%016" PRIx64 "\",\"backend\":\"%s\",\"calls\":[", first_comm ? "" : ",",
                        comm, ccs_backend_name(ac ? ac->backend : CCS_BE_NONE));
                first_comm = 0;
                int first_call = 1;
                while (i < n && v[i]->k.step == step && v[i]->k.rank == rank && v[i]->k.comm == comm) {
                    const struct audit_cell *c = v[i++];
                    fprintf(f,
                            "%s{\"kind\":\"%s\",\"deferred\":%s,%s\"count\":%" PRIu64 ",\"bytes\":%" PRIu64
                            ",\"time_ns\":%" PRIu64 "}",
                            first_call ? "" : ",", ccs_kind_name(c->k.kind), c->k.deferred == 1 ? "true" : "false",
                            c->k.deferred == 2 ? "\"helper\":true," : "", c->count, c->bytes, c->time_ns);
                    first_call = 0;
                }
                fputs("]}", f);
            }
            fputs("]}", f);
        }
        step_comms(a, f, step, sc, nsc, &j);
    }
    fputs(n ? "]}]" : "]", f);
    fputs(",\n", f);
    free(v);
    free(sc);
}

static void findings(struct audit *a, FILE *f)
{
    static const char *sev[] = {"info", "warning", "error"};
    fputs("\"findings\":[", f);
    for (size_t i = 0; i < a->nfindings; i++) {
        const struct audit_finding *x = &a->findings[i];
        fprintf(f, "%s\n{\"kind\":\"%s\",\"severity\":\"%s\",\"title\":", i ? "," : "", audit_finding_name(x->kind),
                sev[x->severity]);
        json_str(f, x->title);
        fputs(",\"evidence\":", f);
        json_str(f, x->evidence);
        fputs(",\"action\":", f);
        json_str(f, x->action);
        fprintf(f,
                ",\"step_first\":%u,\"step_last\":%u,\"steps\":%u,\"k\":%" PRIu64 ",\"comm\":\"%016" PRIx64
                "\",\"first_seq\":%" PRIu64 ",\"ranks\":[",
                x->step_first, x->step_last, x->steps, x->k, x->comm, x->first_seq);
        for (int r = 0; r < x->nranks; r++)
            fprintf(f, "%s%d", r ? "," : "", (int)x->ranks[r]);
        fputs("]}", f);
    }
    fputs("],\n", f);
}

static void sites(struct audit *a, FILE *f)
{
    size_t nsites;
    struct audit_site **v = audit_sorted_sites(a, &nsites);
    fputs("\"sites\":[", f);
    if (v) {
        for (size_t i = 0; i < nsites; i++) {
            const struct audit_site *s = v[i];
            char nm[512];
            fprintf(f,
                    "%s\n{\"count\":%" PRIu64 ",\"bytes\":%" PRIu64 ",\"deferred\":%" PRIu64 ",\"time_ns\":%" PRIu64
                    ",\"wait_ns\":%" PRIu64 ",\"name\":",
                    i ? "," : "", s->count, s->bytes, s->deferred, s->time_ns, s->wait_ns);
            json_str(f, audit_site_name(s, nm, sizeof nm));
            fputs(",\"python\":", f);
            if (s->pysite)
                json_str(f, s->pysite);
            else
                fputs("null", f);
            fputs(",\"kinds\":[", f);
            int first = 1;
            for (unsigned k = 0; k < 32; k++)
                if (s->kinds_mask & (1u << k)) {
                    fprintf(f, "%s\"%s\"", first ? "" : ",", ccs_kind_name(k));
                    first = 0;
                }
            fputs("],\"module\":", f);
            if (s->module)
                json_str(f, s->module);
            else
                fputs("null", f);
            fprintf(f, ",\"offset\":\"0x%" PRIx64 "\",\"symbol\":", s->offset);
            if (s->symbol)
                json_str(f, s->symbol);
            else
                fputs("null", f);
            fputs(",\"resolved\":", f);
            if (s->resolved)
                json_str(f, s->resolved);
            else
                fputs("null", f);
            fputs(",\"frames\":", f);
            json_str(f, s->frames);
            fputc('}', f);
        }
        free(v);
    }
    fputs("],\n", f);
}

static void reports(struct audit *a, FILE *f)
{
    fputs("\"reports\":[", f);
    for (size_t i = 0; i < a->nreports; i++) {
        const struct audit_report *r = &a->reports[i];
        fprintf(f, "%s\n{\"path\":", i ? "," : "");
        json_str(f, r->path);
        fprintf(f, ",\"type\":\"%s\",\"size\":%" PRIu64 ",\"summary\":", r->flight ? "flight" : "desync", r->size);
        json_str(f, r->summary);
        fputc('}', f);
    }
    fputs("],\n", f);
}

static void expects(struct audit *a, FILE *f)
{
    static const char *scope[] = {"comm", "step", "buffer"};
    fputs("\"expect\":[", f);
    for (size_t i = 0; i < a->nexpects; i++) {
        const struct audit_expect *e = &a->expects[i];
        fprintf(f, "%s\n{\"rule\":", i ? "," : "");
        json_str(f, e->text);
        fprintf(f,
                ",\"kind\":\"%s\",\"limit\":%" PRIu64 ",\"scope\":\"%s\",\"worst\":%" PRIu64
                ",\"violations\":%" PRIu64 ",\"passed\":%s}",
                ccs_kind_name(e->kind), e->limit, scope[e->scope], e->worst, e->violations,
                e->violations ? "false" : "true");
    }
    fputs("]\n", f);
}

/* "time": per rank (run time, in collectives, wait), per step and rank,
 * what coalescing saved (null: not measured). */
static void times(struct audit *a, FILE *f)
{
    fprintf(f, "\"time\":{\"timed\":%s,\"wait_partial\":%s,\"ranks\":[", a->timed ? "true" : "false",
            a->time_capped ? "true" : "false");
    int first = 1;
    for (size_t i = 0; i < a->nfiles; i++) {
        const struct audit_file *x = &a->files[i];
        if (x->status == FILE_REFUSED)
            continue;
        fprintf(f, "%s\n{\"rank\":%d,\"run_ns\":%" PRIu64 ",\"collectives_ns\":%" PRIu64 ",\"wait_ns\":%" PRIu64 "}",
                first ? "" : ",", (int)x->rank, x->t_last_ns, x->coll_ns, x->wait_ns);
        first = 0;
    }
    fputs("],\n\"steps\":[", f);
    size_t n;
    struct audit_steptime **v = audit_sorted_steptimes(a, &n);
    for (size_t i = 0; v && i < n; i++) {
        int new_step = i == 0 || v[i - 1]->k.step != v[i]->k.step;
        if (new_step)
            fprintf(f, "%s\n{\"step\":%u,\"ranks\":[", i ? "]}," : "", v[i]->k.step);
        fprintf(f, "%s{\"rank\":%d,\"collectives_ns\":%" PRIu64 ",\"wait_ns\":%" PRIu64 "}", new_step ? "" : ",",
                (int)v[i]->k.rank, v[i]->time_ns, v[i]->wait_ns);
    }
    fputs(v && n ? "]}]" : "]", f);
    free(v);
    fprintf(f, ",\n\"coalescing\":{\"deferred\":%" PRIu64 ",\"measured\":%" PRIu64 ",\"saved_ns\":", a->saved.deferred,
            a->saved.measured);
    if (a->saved.measured)
        fprintf(f, "%" PRIu64 "}},\n", a->saved.saved_ns);
    else
        fputs("null}},\n", f);
}

void out_json(struct audit *a, FILE *f)
{
    static const char *src[] = {"none", "markers", "inferred"};
    fprintf(f, "{\"schema\":\"ccshim-audit\",\"version\":%d,\n\"steps_source\":\"%s\",\"inference\":",
            AUDIT_JSON_VERSION, src[a->steps.source]);
    if (a->steps.source == STEPS_INFERRED)
        fprintf(f, "{\"period\":%" PRIu64 ",\"head\":%" PRIu64 ",\"calls_examined\":%" PRIu64 "}", a->steps.period,
                a->steps.head, a->steps.tokens);
    else
        fputs("null", f);
    fprintf(f, ",\"pattern_rank\":%d,\n", (int)a->ref_rank);
    files(a, f);
    comms(a, f);
    steps(a, f);
    times(a, f);
    findings(a, f);
    sites(a, f);
    reports(a, f);
    expects(a, f);
    fputs("}\n", f);
}

static int json_close(struct audit_sink *s)
{
    out_json(s->a, stdout);
    return 0;
}

const struct audit_sink_type audit_sink_json = {
    .option = "json",
    .help = "  --json               one JSON document instead of the table (schema: docs/audit.md)\n",
    .flags = AUDIT_SINK_STDOUT | AUDIT_SINK_REPORT | AUDIT_SINK_PATTERNS,
    .close = json_close,
};
