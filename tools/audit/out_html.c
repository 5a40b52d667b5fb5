/*
 * out_html.c - --html FILE: one self-contained page (no network): a chart of
 * reductions per step and rank (inline SVG), the findings, the per-step
 * patterns and the call-site table.  A small inline script adds the totals
 * line, so a headless browser can tell the page ran.
 */
#include "audit.h"
#include "ccs_kinds.h"
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define MAX_STEPS_SHOWN 120
#define MAX_RANKS_BARS 32

/* Reductions of one rank in one step. */
struct step_rank_count {
    struct {
        uint32_t step;
        int32_t rank;
    } k;
    uint64_t real, deferred;
};

static const char *css =
    "body{font:14px/1.4 system-ui,sans-serif;margin:2em;color:#222;max-width:1200px}"
    "h1{font-size:1.5em}h2{font-size:1.2em;margin-top:2em;border-bottom:1px solid #ccc}"
    "table{border-collapse:collapse}td,th{padding:2px 8px;text-align:left;border-bottom:1px solid #eee}"
    "td.n{text-align:right;font-variant-numeric:tabular-nums}"
    ".finding{margin:.6em 0}.sev-error{color:#b00}.sev-warning{color:#a60}.sev-info{color:#06a}"
    ".ev,.act{margin-left:1.5em;color:#444}.pat{font-family:monospace;font-size:12px}"
    ".bar{fill:#3b78c4}.bar.deferred{fill:#bbb}.bar.odd{fill:#d33}.axis{stroke:#888}"
    "svg text{font-size:10px;fill:#444}.legend span{display:inline-block;width:12px;height:12px;margin:0 4px}";

static struct step_rank_count *count_of(struct hmap *m, uint32_t step, int32_t rank, int create)
{
    struct step_rank_count key;
    memset(&key, 0, sizeof key);
    key.k.step = step;
    key.k.rank = rank;
    return hmap_get(m, &key, create);
}

static uint64_t real_of(struct hmap *m, uint32_t step, int32_t rank)
{
    struct step_rank_count *s = count_of(m, step, rank, 0);
    return s ? s->real : 0;
}

/* With many ranks the chart shows two per step: the one with the fewest real
 * reductions and the one with the most (on a tie, a rank that differs from
 * the others, else the lowest). */
static int32_t extreme(struct hmap *m, uint32_t step, const int32_t *ranks, size_t nr, int most, const int32_t *out,
                       size_t nout)
{
    int32_t best = nr ? ranks[0] : -1;
    uint64_t bv = nr ? real_of(m, step, best) : 0;
    int bodd = 0;
    for (size_t i = 0; i < nr; i++) {
        uint64_t v = real_of(m, step, ranks[i]);
        int odd = 0;
        for (size_t o = 0; o < nout; o++)
            odd |= out[o] == ranks[i];
        if ((most ? v > bv : v < bv) || (v == bv && odd && !bodd)) {
            best = ranks[i];
            bv = v;
            bodd = odd;
        }
    }
    return best;
}

/* Real and deferred reductions per (step, rank), for the steps shown. */
static void count_reductions(const struct audit *a, struct hmap *m)
{
    hmap_init(m, sizeof(struct step_rank_count), 8);
    for (size_t i = 0; i < a->cells.cap; i++) {
        struct audit_cell *c = hmap_slot(&a->cells, i);
        if (!c || !ccs_kind_reduces(c->k.kind) || c->k.step >= MAX_STEPS_SHOWN)
            continue;
        struct step_rank_count *s = count_of(m, c->k.step, c->k.rank, 1);
        if (!s)
            continue;
        if (c->k.deferred == 1) /* 2: the helper's real reductions */
            s->deferred += c->count;
        else
            s->real += c->count;
    }
}

/* The ranks in the chart: those with a readable trace (malloc'd, *NR of them). */
static int32_t *readable_ranks(const struct audit *a, size_t *nr)
{
    int32_t *ranks = malloc((a->nfiles + 1) * sizeof *ranks);
    *nr = 0;
    for (size_t i = 0; ranks && i < a->nfiles; i++)
        if (a->files[i].status != FILE_REFUSED && (*nr == 0 || ranks[*nr - 1] != a->files[i].rank))
            ranks[(*nr)++] = a->files[i].rank;
    return ranks;
}

/* The chart's sizes, in pixels but for the counts. */
struct chart_layout {
    uint32_t nsteps;
    int per_rank; /* a bar per rank, else the two extreme ranks */
    size_t bars_per_step;
    uint64_t ymax; /* the tallest bar's reductions */
    double bar_width, gap, height, left, width;
};

static struct chart_layout chart_layout(const struct audit *a, const struct hmap *m, size_t nr)
{
    struct chart_layout l = {.height = 220.0, .left = 40.0, .ymax = 1};
    l.nsteps = a->max_step + 1 < MAX_STEPS_SHOWN ? a->max_step + 1 : MAX_STEPS_SHOWN;
    l.per_rank = nr <= MAX_RANKS_BARS;
    l.bars_per_step = l.per_rank ? (nr ? nr : 1) : 2;
    for (size_t i = 0; i < m->cap; i++) {
        struct step_rank_count *s = hmap_slot(m, i);
        if (s && s->real + s->deferred > l.ymax)
            l.ymax = s->real + s->deferred;
    }
    /* Bars as wide as fits about 800 pixels, within 3 and 24. */
    double bw = 800.0 / ((double)l.nsteps * (double)l.bars_per_step);
    l.bar_width = bw < 3 ? 3 : bw > 24 ? 24 : bw;
    l.gap = l.bar_width * 1.5;
    l.width = l.left + l.nsteps * (l.bars_per_step * l.bar_width + l.gap) + 20;
    if (l.width < 400)
        l.width = 400;
    return l;
}

/* The heading, the legend, the svg element and its axes. */
static void chart_open(const struct audit *a, const struct chart_layout *l, FILE *f)
{
    fprintf(f,
            "<h2>Reductions per step%s</h2>\n<p class=\"legend\"><span style=\"background:#3b78c4\"></span>real "
            "<span style=\"background:#bbb\"></span>deferred (coalesced) <span style=\"background:#d33\"></span>"
            "rank that differs from the others%s</p>\n",
            l->per_rank ? " and rank" : " (the ranks with the fewest and the most)",
            a->max_step + 1 > MAX_STEPS_SHOWN ? "; first steps only" : "");
    fprintf(f,
            "<svg id=\"chart-reductions\" width=\"%.0f\" height=\"%.0f\" "
            "role=\"img\" aria-label=\"reductions per step and rank\">\n",
            l->width, l->height + 40);
    fprintf(f, "<line class=\"axis\" x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\"/>\n", l->left, l->height,
            l->width - 10, l->height);
    fprintf(f, "<line class=\"axis\" x1=\"%.0f\" y1=\"10\" x2=\"%.0f\" y2=\"%.0f\"/>\n", l->left, l->left,
            l->height);
    fprintf(f, "<text x=\"2\" y=\"14\">%" PRIu64 "</text><text x=\"2\" y=\"%.0f\">0</text>\n", l->ymax, l->height);
}

/* One rank's bar in a step at X: the real reductions, the deferred ones on top. */
static void chart_bar(struct hmap *m, const struct chart_layout *l, uint32_t step, int32_t rank, double x, int odd,
                      FILE *f)
{
    struct step_rank_count *s = count_of(m, step, rank, 0);
    uint64_t real = s ? s->real : 0, deferred = s ? s->deferred : 0;
    double H = l->height, bw = l->bar_width;
    double real_height = (double)real / l->ymax * (H - 20), deferred_height = (double)deferred / l->ymax * (H - 20);
    fprintf(f,
            "<rect class=\"bar%s\" data-step=\"%u\" data-rank=\"%d\" data-count=\"%" PRIu64
            "\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\"><title>step %u rank %d: %" PRIu64
            " reductions</title></rect>\n",
            odd ? " odd" : "", step, (int)rank, real, x, H - real_height, bw - 1, real_height, step, (int)rank,
            real);
    if (deferred)
        fprintf(f,
                "<rect class=\"bar deferred\" data-step=\"%u\" data-rank=\"%d\" data-count=\"%" PRIu64
                "\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\"><title>step %u rank %d: %" PRIu64
                " deferred</title></rect>\n",
                step, (int)rank, deferred, x, H - real_height - deferred_height, bw - 1, deferred_height, step,
                (int)rank, deferred);
}

/* The ranks that differ from the others in STEP on any communicator (at most MAX). */
static size_t step_outliers(struct audit *a, uint32_t step, int32_t *out, size_t max)
{
    size_t nout = 0;
    for (size_t ci = 0; ci < a->ncomms; ci++) {
        size_t k = audit_step_outliers(a, step, a->comms[ci].id, out + nout, max - nout);
        nout += k < max - nout ? k : max - nout;
    }
    return nout;
}

static void chart(struct audit *a, FILE *f)
{
    struct hmap m;
    count_reductions(a, &m);
    size_t nr;
    int32_t *ranks = readable_ranks(a, &nr);
    struct chart_layout l = chart_layout(a, &m, nr);
    chart_open(a, &l, f);
    for (uint32_t st = 0; st < l.nsteps; st++) {
        double x0 = l.left + 4 + st * (l.bars_per_step * l.bar_width + l.gap);
        int32_t out[64];
        size_t nout = step_outliers(a, st, out, 64);
        for (size_t b = 0; b < l.bars_per_step; b++) {
            int32_t rank = l.per_rank ? (nr ? ranks[b] : -1) : extreme(&m, st, ranks, nr, b == 1, out, nout);
            int odd = 0;
            for (size_t o = 0; o < nout; o++)
                odd |= out[o] == rank;
            chart_bar(&m, &l, st, rank, x0 + b * l.bar_width, odd, f);
        }
        if (l.nsteps <= 40 || st % 10 == 0)
            fprintf(f, "<text x=\"%.1f\" y=\"%.0f\">%u</text>\n", x0, l.height + 14, st);
    }
    fprintf(f, "<text x=\"%.0f\" y=\"%.0f\">step</text>\n</svg>\n", l.width / 2, l.height + 32);
    free(ranks);
    hmap_free(&m);
}

/* Time in collectives per step and rank: a grid (a row per rank, labelled,
 * a column per step), each cell as dark as the most time any cell took,
 * its waiting part drawn in red over it; the exact numbers in each cell's
 * title; then the table of ranks' totals and shares. */
static void time_chart(struct audit *a, FILE *f)
{
    if (!a->timed)
        return;
    size_t nr, n;
    int32_t *ranks = readable_ranks(a, &nr);
    struct audit_steptime **v = audit_sorted_steptimes(a, &n);
    uint64_t tmax = 1;
    for (size_t i = 0; v && i < n; i++)
        if (v[i]->time_ns > tmax)
            tmax = v[i]->time_ns;
    uint32_t nsteps = a->max_step + 1 < MAX_STEPS_SHOWN ? a->max_step + 1 : MAX_STEPS_SHOWN;
    size_t rows = nr < 64 ? nr : 64;
    double left = 60, top = 10, cw = 800.0 / nsteps, ch = 22;
    if (cw > 40)
        cw = 40;
    if (cw < 4)
        cw = 4;
    double width = left + nsteps * cw + 20, height = top + rows * ch + 40;
    char t1[32], t2[32], t3[32], s1[16], s2[16];
    fprintf(f,
            "<h2>Time in collectives per step and rank</h2>\n<p class=\"legend\">darker: more time in "
            "collectives (the darkest %s); <span style=\"background:#d33\"></span>the part spent waiting (beyond "
            "the fastest rank's time in the same calls)%s%s</p>\n",
            fmt_time(tmax, t1, sizeof t1), a->max_step + 1 > MAX_STEPS_SHOWN ? "; first steps only" : "",
            nr > rows ? "; first 64 ranks only" : "");
    fprintf(f, "<svg id=\"chart-time\" width=\"%.0f\" height=\"%.0f\" role=\"img\" "
               "aria-label=\"time in collectives per step and rank\">\n", width, height);
    for (size_t r = 0; r < rows; r++)
        fprintf(f, "<text class=\"rank-label\" x=\"2\" y=\"%.1f\">rank %d</text>\n", top + r * ch + ch * 0.7,
                (int)ranks[r]);
    for (size_t i = 0; v && i < n; i++) {
        const struct audit_steptime *st = v[i];
        size_t r = 0;
        while (r < rows && ranks[r] != st->k.rank)
            r++;
        if (r == rows || st->k.step >= nsteps)
            continue;
        double x = left + st->k.step * cw, y = top + r * ch;
        double op = 0.1 + 0.9 * (double)st->time_ns / (double)tmax;
        double wh = st->time_ns ? (ch - 2) * (double)st->wait_ns / (double)st->time_ns : 0;
        fprintf(f,
                "<g data-step=\"%u\" data-rank=\"%d\" data-time-ns=\"%" PRIu64 "\" data-wait-ns=\"%" PRIu64 "\">"
                "<title>step %u rank %d: %s in collectives, %s waiting</title>"
                "<rect class=\"cell\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#3b78c4\" "
                "fill-opacity=\"%.2f\"/>",
                st->k.step, (int)st->k.rank, st->time_ns, st->wait_ns, st->k.step, (int)st->k.rank,
                fmt_time(st->time_ns, t1, sizeof t1), fmt_time(st->wait_ns, t2, sizeof t2), x, y, cw - 1, ch - 2,
                op);
        if (wh >= 0.5)
            fprintf(f, "<rect class=\"wait\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#d33\"/>",
                    x, y + (ch - 2) - wh, cw - 1, wh);
        fputs("</g>\n", f);
    }
    for (uint32_t st = 0; st < nsteps; st++)
        if (nsteps <= 40 || st % 10 == 0)
            fprintf(f, "<text x=\"%.1f\" y=\"%.0f\">%u</text>\n", left + st * cw, top + rows * ch + 14, st);
    fprintf(f, "<text x=\"%.0f\" y=\"%.0f\">step</text>\n</svg>\n", width / 2, top + rows * ch + 32);
    free(v);
    free(ranks);
    fprintf(f, "<table id=\"time\"><tr><th>rank</th><th>run time</th><th>in collectives</th><th>share</th>"
               "<th>wait</th><th>share</th></tr>\n");
    for (size_t i = 0; i < a->nfiles; i++) {
        const struct audit_file *x = &a->files[i];
        if (x->status == FILE_REFUSED)
            continue;
        fprintf(f,
                "<tr><td class=\"n\">%d</td><td class=\"n\">%s</td><td class=\"n\">%s</td><td class=\"n\">%s</td>"
                "<td class=\"n\">%s</td><td class=\"n\">%s</td></tr>\n",
                (int)x->rank, fmt_time(x->t_last_ns, t1, sizeof t1), fmt_time(x->coll_ns, t2, sizeof t2),
                fmt_share(x->coll_ns, x->t_last_ns, s1, sizeof s1), fmt_time(x->wait_ns, t3, sizeof t3),
                fmt_share(x->wait_ns, x->t_last_ns, s2, sizeof s2));
    }
    fputs("</table>\n", f);
    if (a->saved.deferred) {
        fputs("<p id=\"saved\">", f);
        if (a->saved.measured)
            fprintf(f, "Coalescing saved %s: %" PRIu64 " deferred reductions, each the mean time of the same "
                       "reduction made for real in this job, less its own.", fmt_time(a->saved.saved_ns, t1, sizeof t1),
                    a->saved.measured);
        else
            fprintf(f, "Coalescing deferred %" PRIu64 " reductions; the time saved is not claimed: this job made "
                       "none of them for real to measure it against.", a->saved.deferred);
        fputs("</p>\n", f);
    }
}

static void findings(struct audit *a, FILE *f)
{
    static const char *sev[] = {"info", "warning", "error"};
    fprintf(f, "<h2>Findings</h2>\n<ol id=\"findings\">\n");
    if (!a->nfindings)
        fprintf(f,
                "<li class=\"none\">None: every rank made the same calls and no coalescible buffer (a "
                "floating-point sum of %d bytes or more) was reduced twice in a step.</li>\n",
                (int)audit_coalesce_min_bytes());
    for (size_t i = 0; i < a->nfindings; i++) {
        const struct audit_finding *x = &a->findings[i];
        fprintf(f, "<li class=\"finding sev-%s\" data-kind=\"%s\" data-severity=\"%s\" data-k=\"%" PRIu64 "\"><b>",
                sev[x->severity], audit_finding_name(x->kind), sev[x->severity], x->k);
        html_str(f, x->title);
        fputs("</b><div class=\"ev\">Evidence: ", f);
        /* A line per rank or group of ranks ("; rank" starts one): a
         * post-mortem's states, a verdict's sides, read down. */
        char ev[sizeof x->evidence];
        snprintf(ev, sizeof ev, "%s", x->evidence);
        char *p = ev;
        for (char *semi; (semi = strstr(p, "; rank")); p = semi + 2) {
            *semi = 0;
            html_str(f, p);
            fputs(";<br>", f);
        }
        html_str(f, p);
        fputs("</div><div class=\"act\">Action: ", f);
        html_str(f, x->action);
        fputs("</div></li>\n", f);
    }
    fputs("</ol>\n", f);
}

static void sites(struct audit *a, FILE *f)
{
    fprintf(f, "<h2>Top call sites</h2>\n<table id=\"sites\"><tr><th>calls</th><th>bytes</th><th>deferred</th>"
               "<th>time</th><th>wait</th><th>kinds</th><th>site</th><th>stack</th></tr>\n");
    size_t nsites;
    struct audit_site **v = audit_sorted_sites(a, &nsites);
    if (v) {
        for (size_t i = 0; i < nsites && i < 20; i++) {
            char b[32], nm[512], t1[32], t2[32];
            fprintf(f,
                    "<tr class=\"site\"><td class=\"n\">%" PRIu64
                    "</td><td class=\"n\">%s</td><td class=\"n\">%" PRIu64
                    "</td><td class=\"n\">%s</td><td class=\"n\">%s</td><td>",
                    v[i]->count, fmt_bytes(v[i]->bytes, b, sizeof b), v[i]->deferred,
                    fmt_time(v[i]->time_ns, t1, sizeof t1), fmt_time(v[i]->wait_ns, t2, sizeof t2));
            int first = 1;
            for (unsigned k = 0; k < 32; k++)
                if (v[i]->kinds_mask & (1u << k)) {
                    fprintf(f, "%s%s", first ? "" : ", ", ccs_kind_name(k));
                    first = 0;
                }
            fputs("</td><td>", f);
            html_str(f, audit_site_name(v[i], nm, sizeof nm));
            fputs("</td><td class=\"pat\">", f);
            html_str(f, v[i]->frames);
            fputs("</td></tr>\n", f);
        }
        free(v);
    }
    fputs("</table>\n", f);
}

static void patterns(struct audit *a, FILE *f)
{
    size_t n;
    struct audit_stepcomm **v = audit_sorted_stepcomms(a, &n);
    fprintf(f,
            "<h2>Call pattern per step (rank %d)</h2>\n<table id=\"patterns\"><tr><th>step</th><th>comm</th>"
            "<th>pattern</th></tr>\n",
            (int)a->ref_rank);
    size_t shown = 0;
    for (size_t i = 0; v && i < n && shown < MAX_STEPS_SHOWN; i++) {
        if (!v[i]->pattern)
            continue;
        /* consecutive steps with the same pattern on one line */
        size_t j = i;
        while (j + 1 < n && v[j + 1]->k.comm == v[i]->k.comm && v[j + 1]->k.step == v[j]->k.step + 1 &&
               v[j + 1]->pattern && strcmp(v[j + 1]->pattern, v[i]->pattern) == 0)
            j++;
        if (j > i)
            fprintf(f, "<tr><td>%u-%u</td>", v[i]->k.step, v[j]->k.step);
        else
            fprintf(f, "<tr><td>%u</td>", v[i]->k.step);
        fprintf(f, "<td class=\"pat\">%016" PRIx64 "</td><td class=\"pat\">", v[i]->k.comm);
        html_str(f, v[i]->pattern);
        fputs("</td></tr>\n", f);
        shown++;
        i = j;
    }
    fputs("</table>\n", f);
    free(v);
}

static void files(struct audit *a, FILE *f)
{
    static const char *st[] = {"complete", "cut short", "damaged", "skipped"};
    fprintf(f, "<h2>Traces</h2>\n<table id=\"files\"><tr><th>rank</th><th>host</th><th>calls</th><th>last step</th>"
               "<th>status</th></tr>\n");
    for (size_t i = 0; i < a->nfiles; i++) {
        const struct audit_file *x = &a->files[i];
        fprintf(f, "<tr><td>%d</td><td>", (int)x->rank);
        html_str(f, x->host);
        fprintf(f, "</td><td class=\"n\">%" PRIu64 "</td><td class=\"n\">%u</td><td>", x->records, x->last_step);
        if (x->status == FILE_OK && x->has_end && x->end.reason == CCS_END_SIGNAL)
            fprintf(f, "killed by signal %d", (int)x->end.signo); /* whole, but not ended by itself */
        else
            fputs(st[x->status], f);
        if (x->error) {
            fputs(": ", f);
            html_str(f, x->error);
        }
        fputs("</td></tr>\n", f);
    }
    fputs("</table>\n", f);
}

int out_html(struct audit *a, const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    const char *job = "";
    for (size_t i = 0; i < a->nfiles; i++)
        if (a->files[i].job[0]) {
            job = a->files[i].job;
            break;
        }
    fprintf(f, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>ccshim-audit ");
    html_str(f, job);
    fprintf(f, "</title>\n<style>%s</style></head>\n<body>\n<h1>ccshim-audit: job ", css);
    html_str(f, job[0] ? job : "?");
    fprintf(f, "</h1>\n<p id=\"summary\">%zu trace%s, %u step%s (%s). <span id=\"js-summary\"></span></p>\n",
            a->nfiles, a->nfiles == 1 ? "" : "s", a->max_step + 1, a->max_step ? "s" : "",
            a->steps.source == STEPS_MARKERS    ? "from step markers"
            : a->steps.source == STEPS_INFERRED ? "inferred from the repeating call pattern"
                                                : "no markers, no repeating pattern");
    chart(a, f);
    time_chart(a, f);
    findings(a, f);
    patterns(a, f);
    sites(a, f);
    files(a, f);
    fputs("<script>\n"
          "(function(){var bars=document.querySelectorAll('#chart-reductions rect.bar:not(.deferred)');\n"
          "var total=0;bars.forEach(function(b){total+=Number(b.dataset.count);});\n"
          "var fs=document.querySelectorAll('#findings li.finding').length;\n"
          "document.getElementById('js-summary').textContent=bars.length+' bars, '+total+' reductions shown, '+fs+"
          "' findings.';\n"
          "document.body.setAttribute('data-ready','1');})();\n"
          "</script>\n</body></html>\n",
          f);
    int rc = ferror(f) ? -1 : 0;
    if (fclose(f) != 0)
        rc = -1;
    return rc;
}

static int html_close(struct audit_sink *s)
{
    if (out_html(s->a, s->arg) == 0)
        return 0;
    fprintf(stderr, "ccshim-audit: %s: cannot write the HTML report\n", s->arg);
    return -1;
}

const struct audit_sink_type audit_sink_html = {
    .option = "html",
    .arg = "FILE",
    .help = "  --html FILE          also write a self-contained HTML report\n",
    .flags = AUDIT_SINK_REPORT | AUDIT_SINK_PATTERNS,
    .close = html_close,
};
