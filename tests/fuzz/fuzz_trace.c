/*
 * fuzz_trace.c - libFuzzer target: any bytes, as a trace file, through the
 * streaming reader (src/trace/trace_reader.c: every chunk type, format
 * versions 1 and 2) and then through the whole audit (aggregation, step
 * inference, patterns, findings, tables, JSON).  Seeds: corpus/fuzz_trace,
 * written by fuzz_seeds.c (docs/fuzzing.md).
 */
#include "audit.h"
#include "fuzz_common.h"
#include "trace_reader.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char path[4096];

static void remove_input(void)
{
    unlink(path);
}

static void write_input(const uint8_t *data, size_t size)
{
    if (!path[0]) {
        atexit(remove_input);
        snprintf(path, sizeof path, "%s/ccshim-fuzz-%d.cctrace", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
                 (int)getpid());
    }
    FILE *f = fopen(path, "wb");
    if (!f)
        abort();
    if (size && fwrite(data, size, 1, f) != 1)
        abort();
    fclose(f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[512];
    write_input(data, size);

    /* The reader alone: every item, every pointer it hands out. */
    struct ccs_trace_reader *r = ccs_trace_open(path, err, sizeof err);
    if (r) {
        struct ccs_item it;
        size_t sum = 0;
        while (ccs_trace_next(r, &it, err, sizeof err) == 1) {
            if (it.type == CCS_ITEM_META)
                sum += strlen(it.u.meta.text);
            else if (it.type == CCS_ITEM_MODULE)
                sum += strlen(it.u.module.path);
            else if (it.type == CCS_ITEM_SITE)
                for (uint32_t i = 0; i < it.u.site.depth; i++)
                    sum += it.u.site.symbols[i] ? strlen(it.u.site.symbols[i]) : 0;
        }
        (void)ccs_trace_truncated(r);
        (void)ccs_trace_lost(r);
        (void)ccs_trace_hdr(r);
        const char *v = ccs_trace_meta(r, "host");
        sum += v ? strlen(v) : 0;
        ccs_trace_close(r);
        (void)sum;
    }

    /* The whole audit on it. */
    struct audit a;
    char *args[] = {path};
    audit_init(&a);
    a.max_tokens = 1u << 14;
    a.max_ref_fp = 1u << 14;
    if (audit_collect(&a, args, 1) == 0) {
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
