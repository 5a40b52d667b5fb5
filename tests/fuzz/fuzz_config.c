/*
 * fuzz_config.c - libFuzzer target: the values of every CCSHIM_* setting
 * (src/core/config_table.h) through the parser that reads them
 * (src/core/config.c), then the settings whose text has a grammar of its
 * own through theirs: CCSHIM_LOG's file pattern (log.c: ccs_expand_pattern),
 * CCSHIM_COALESCE (ccs_coalesce_parse) and CCSHIM_COALESCE_INCLUDE and
 * _EXCLUDE (names_one_of).  config.c, log.c and coalesce_policy.c are
 * compiled in here to reach their static parsers.
 *
 * Input: one value per line, in the table's order (a line that is one
 * 0x01 byte, or no line at all: the variable is unset), then the text of a
 * call site for the include and exclude lists, then a byte: a buffer size
 * for the pattern.  Checked: each value is taken or refused with one
 * report naming the variable and the default kept; a number within its
 * range, a word among its list; the report and the expansion NUL-terminated
 * within their buffers.
 */
#include "coalesce_policy.c"
#include "config.c"
#include "fuzz_common.h"
#include "log.c"
#include <fcntl.h>

/* The process identity log.c asks for (process.c is left out). */
int ccs_world_rank(void)
{
    return 3;
}
const char *ccs_hostname(void)
{
    return "fuzzhost";
}
const char *ccs_job_id(void)
{
    return "job-42";
}

/* Call sites, for coalesce_policy.c's include and exclude lists: every
 * frame is named by the input's text. */
static const char *cur_site = "";
uint32_t ccs_site_id(void *pc)
{
    return (uint32_t)(uintptr_t)pc;
}
int ccs_site_get(uint32_t id, void **pcs, uint32_t *depth)
{
    (void)id, (void)pcs, (void)depth;
    return -1;
}
void ccs_site_symbolize(void *pc, char *buf, size_t n)
{
    (void)pc;
    snprintf(buf, n, "%s", cur_site);
}

#define NV 64
static const char *vals[NV];
static unsigned nreports, expected_bad;

static const char *fake_getenv(const char *name)
{
    for (size_t i = 0; i < ccs_config_nrows && i < NV; i++)
        if (strcmp(ccs_config_rows[i].name, name) == 0)
            return vals[i];
    abort(); /* the parser asked for a name not in the table */
}

static void report(const char *msg)
{
    if (strnlen(msg, 768) >= 768 || !strstr(msg, "CCSHIM_"))
        abort(); /* not terminated within the parser's buffer, or names no variable */
    nreports++;
}

/* Each type: the value V given (NULL: unset) was taken, or refused and the
 * default kept. */
static void check_BOOL(const int *got, const char *name, const char *field, const char *def, const char *help,
                       const char *v)
{
    int want, ok = v && parse_bool(v, &want) == 0;
    (void)name, (void)field, (void)help;
    if (v && !ok)
        expected_bad++;
    if (!ok && parse_bool(def, &want) != 0)
        abort(); /* a default that does not parse */
    if (*got != want)
        abort();
}

static void check_INT(const long *got, const char *name, const char *field, const char *def, const char *help,
                      const char *v)
{
    long lo, hi, want;
    (void)name, (void)help;
    range_of(field, &lo, &hi);
    int ok = v && parse_int(v, lo, hi, &want) == 0;
    if (v && !ok)
        expected_bad++;
    if (!ok && parse_int(def, lo, hi, &want) != 0)
        abort();
    if (*got != want || *got < lo || *got > hi)
        abort();
}

static void check_ENUM(const int *got, const char *name, const char *field, const char *def, const char *help,
                       const char *v)
{
    int want = v ? ccs_config_enum_index(help, v) : -1;
    (void)name, (void)field;
    if (v && want < 0)
        expected_bad++;
    if (want < 0)
        want = ccs_config_enum_index(help, def);
    if (want < 0 || *got != want)
        abort();
}

static void check_STR(const char *const *got, const char *name, const char *field, const char *def,
                      const char *help, const char *v)
{
    (void)name, (void)field, (void)help;
    if (*got != (v ? v : def))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int devnull = -1;
    if (devnull < 0) {
        devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
        atomic_store(&log_fd, devnull); /* the log lines: formatted, then dropped */
    }
    /* Lines of the input, NUL-terminated copies. */
    char *copy = malloc(size + 1);
    if (!copy)
        return 0;
    memcpy(copy, data, size);
    copy[size] = 0;
    char *lines[NV + 2] = {0};
    size_t nl = 0;
    char *p = copy, *end = copy + size;
    while (p <= end && nl < NV + 2) {
        char *nlp = memchr(p, '\n', (size_t)(end - p));
        if (nlp)
            *nlp = 0;
        lines[nl++] = p;
        if (!nlp)
            break;
        p = nlp + 1;
    }
    size_t nrows = ccs_config_nrows < NV ? ccs_config_nrows : NV;
    for (size_t i = 0; i < nrows; i++)
        vals[i] = i < nl && strcmp(lines[i], "\x01") != 0 ? lines[i] : NULL;
    const char *site = nrows < nl ? lines[nrows] : "train_step at model.py:12";
    size_t small = nrows + 1 < nl ? (unsigned char)lines[nrows + 1][0] : 16;

    struct ccs_config cfg;
    memset(&cfg, 0, sizeof cfg);
    nreports = expected_bad = 0;
    int bad = ccs_config_load(&cfg, fake_getenv, report);
    size_t r = 0;
#define CCS_X(field, name, type, def, help) check_##type(&cfg.field, name, #field, def, help, vals[r++]);
    CCS_CONFIG_LIST(CCS_X)
#undef CCS_X
    if (bad < 0 || (unsigned)bad != nreports || nreports != expected_bad)
        abort();

    /* CCSHIM_COALESCE */
    struct ccs_coalesce_policy pol;
    char why[200];
    if (ccs_coalesce_parse(cfg.coalesce, &pol, why, sizeof why) == 0) {
        if (pol.mode == CCS_COALESCE_EVERY && (pol.every < 2 || pol.every > 1000000))
            abort();
    } else if (!memchr(why, 0, sizeof why) || !why[0]) {
        abort();
    }
    /* CCSHIM_COALESCE_INCLUDE, _EXCLUDE against a call site's text, as
     * the coalescer decides (with its cache emptied: each input alone) */
    ccs_cfg = cfg;
    cur_site = site;
    memset(site_cache, 0, sizeof site_cache);
    int ok1 = ccs_coalesce_site_ok((void *)0x1234), ok2 = ccs_coalesce_site_ok((void *)0x1234);
    if (ok1 != ok2)
        abort(); /* the cached decision is the decision */
    (void)names_one_of(cfg.coalesce_exclude, site);
    /* CCSHIM_LOG's pattern, into the library's buffer and a small one */
    char path[4096], *tiny = malloc(small ? small : 1);
    if (ccs_expand_pattern(cfg.log, path, sizeof path) == 0 && strlen(path) >= sizeof path)
        abort();
    if (tiny && small) {
        (void)ccs_expand_pattern(cfg.log, tiny, small);
        if (strnlen(tiny, small) >= small)
            abort();
    }
    free(tiny);
    /* A log line about the values, cut to fit */
    ccs_log(CCS_LOG_ERROR, "CCSHIM_LOG='%s' CCSHIM_COALESCE='%s' site '%s'", cfg.log, cfg.coalesce, site);
    free(copy);
    return 0;
}
