/*
 * fuzz_trace.c - libFuzzer target: any bytes, as a trace file, through the
 * streaming reader (src/trace/trace_reader.c: every chunk type, format
 * versions 1 and 2) and then through the whole audit (aggregation, step
 * inference, patterns, findings, tables, JSON).  An input holding the
 * magic number again further on is two ranks' traces, split there, audited
 * together (the comparisons across ranks).  Seeds: corpus/fuzz_trace,
 * written by fuzz_seeds.c and tests/audit/mktrace (docs/fuzzing.md).
 */
#include "audit.h"
#include "fuzz_common.h"
#include "trace_reader.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char path[2][4096];

static void remove_input(void)
{
    unlink(path[0]);
    unlink(path[1]);
}

static void write_input(int i, const uint8_t *data, size_t size)
{
    if (!path[0][0]) {
        atexit(remove_input);
        for (int k = 0; k < 2; k++)
            snprintf(path[k], sizeof path[k], "%s/ccshim-fuzz-%d-r%d.cctrace",
                     getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)getpid(), k);
    }
    FILE *f = fopen(path[i], "wb");
    if (!f)
        abort();
    if (size && fwrite(data, size, 1, f) != 1)
        abort();
    fclose(f);
}

/* The reader alone on file I: every item, every pointer it hands out. */
static void read_alone(int i)
{
    char err[512];
    struct ccs_trace_reader *r = ccs_trace_open(path[i], err, sizeof err);
    if (r) {
        struct ccs_item it;
        size_t sum = 0;
        while (ccs_trace_next(r, &it, err, sizeof err) == 1) {
            if (it.type == CCS_ITEM_META)
                sum += strlen(it.u.meta.text);
            else if (it.type == CCS_ITEM_MODULE)
                sum += strlen(it.u.module.path);
            else if (it.type == CCS_ITEM_SITE)
                for (uint32_t k = 0; k < it.u.site.depth; k++)
                    sum += it.u.site.symbols[k] ? strlen(it.u.site.symbols[k]) : 0;
            else if (it.type == CCS_ITEM_PYSITE)
                sum += strlen(it.u.pysite.text);
        }
        (void)ccs_trace_truncated(r);
        (void)ccs_trace_lost(r);
        (void)ccs_trace_hdr(r);
        const char *v = ccs_trace_meta(r, "host");
        sum += v ? strlen(v) : 0;
        ccs_trace_close(r);
        (void)sum;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* One trace, or two where the magic number starts again. */
    const uint8_t *second = size > 16 ? memmem(data + 8, size - 8, CCS_TRACE_MAGIC, 8) : NULL;
    size_t first = second ? (size_t)(second - data) : size;
    int nfiles = second ? 2 : 1;
    write_input(0, data, first);
    if (second)
        write_input(1, second, size - first);
    for (int i = 0; i < nfiles; i++)
        read_alone(i);

    /* The whole audit on them. */
    struct audit a;
    char *args[] = {path[0], path[1]};
    audit_init(&a);
    a.max_tokens = 1u << 14;
    a.max_ref_fp = 1u << 14;
    if (audit_collect(&a, args, nfiles) == 0) {
        FILE *null = fopen("/dev/null", "w");
        audit_sort_files(&a);
        audit_find_steps(&a);
        audit_read_all(&a);
        audit_findings(&a);
        if (null) {
            out_json(&a, null);
            out_table(&a, null);
            fclose(null);
        }
    }
    audit_free(&a);
    return 0;
}
