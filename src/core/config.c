/* config.c - parses the CCSHIM_* table (config_table.h) into struct ccs_config,
 * and checks a value the same way for ccshim-run before it launches. */
#include "ccs_config.h"
#include "ccs_kinds.h"
#include "fingerprint.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct ccs_config ccs_cfg;

const struct ccs_config_row ccs_config_rows[] = {
#define CCS_X(field, name, type, def, help) {name, #type, def, help},
    CCS_CONFIG_LIST(CCS_X)
#undef CCS_X
};
const size_t ccs_config_nrows = sizeof ccs_config_rows / sizeof ccs_config_rows[0];

int ccs_config_enum_index(const char *help, const char *word)
{
    const char *p = strchr(help, '{');
    size_t wl = strlen(word);
    int i = 0;
    if (!p || wl == 0)
        return -1;
    p++;
    while (*p && *p != '}') {
        while (*p == ' ')
            p++;
        size_t n = strcspn(p, " }");
        if (n == wl && strncasecmp(p, word, n) == 0)
            return i;
        p += n;
        i++;
    }
    return -1;
}

static int parse_bool(const char *s, int *out)
{
    static const char *yes[] = {"1", "yes", "on", "true", "y"};
    static const char *no[] = {"0", "no", "off", "false", "n"};
    for (size_t i = 0; i < 5; i++) {
        if (strcasecmp(s, yes[i]) == 0)
            return *out = 1, 0;
        if (strcasecmp(s, no[i]) == 0)
            return *out = 0, 0;
    }
    return -1;
}

static int parse_int(const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

static void range_of(const char *field, long *lo, long *hi)
{
    *lo = 0;
    *hi = 0x7fffffffL;
#define CCS_R(f, mn, mx)                                                                                       \
    if (strcmp(field, #f) == 0) {                                                                              \
        *lo = mn;                                                                                              \
        *hi = mx;                                                                                              \
    }
    CCS_CONFIG_RANGES(CCS_R)
#undef CCS_R
}

/* One parser per type, so the X-macro below only forwards. */
static int set_BOOL(int *dst, const char *v, const char *field, const char *help, char *why, size_t n)
{
    (void)field, (void)help;
    if (parse_bool(v, dst) == 0)
        return 0;
    snprintf(why, n, "expected 0/1, yes/no, on/off or true/false");
    return -1;
}

static int set_INT(long *dst, const char *v, const char *field, const char *help, char *why, size_t n)
{
    long lo, hi;
    (void)help;
    range_of(field, &lo, &hi);
    if (parse_int(v, lo, hi, dst) == 0)
        return 0;
    snprintf(why, n, "expected a decimal integer in %ld..%ld", lo, hi);
    return -1;
}

static int set_STR(const char **dst, const char *v, const char *field, const char *help, char *why, size_t n)
{
    (void)field, (void)help, (void)why, (void)n;
    *dst = v;
    return 0;
}

static int set_ENUM(int *dst, const char *v, const char *field, const char *help, char *why, size_t n)
{
    (void)field;
    int i = ccs_config_enum_index(help, v);
    if (i >= 0)
        return *dst = i, 0;
    const char *b = strchr(help, '{'), *e = strchr(help, '}');
    snprintf(why, n, "expected one of: %.*s", b && e ? (int)(e - b - 1) : 0, b ? b + 1 : "");
    return -1;
}

int ccs_config_load(struct ccs_config *cfg, const char *(*getenv_fn)(const char *), void (*report)(const char *))
{
    int bad = 0;
    char why[200], msg[768];
    /* Defaults first (they always parse), then the environment. */
#define CCS_X(field, name, type, def, help) (void)set_##type(&cfg->field, def, #field, help, why, sizeof why);
    CCS_CONFIG_LIST(CCS_X)
#undef CCS_X
#define CCS_X(field, name, type, def, help)                                                                    \
    {                                                                                                          \
        const char *v = getenv_fn(name);                                                                       \
        if (v && set_##type(&cfg->field, v, #field, help, why, sizeof why) != 0) {                             \
            snprintf(msg, sizeof msg, "%s='%.200s%s' ignored: %s; using the default '%s'", name, v,             \
                     strlen(v) > 200 ? "...[truncated]" : "", why, def);                                       \
            report(msg);                                                                                       \
            bad++;                                                                                             \
        }                                                                                                      \
    }
    CCS_CONFIG_LIST(CCS_X)
#undef CCS_X
    return bad;
}

int ccs_config_parse_coord(const char *c, int any_port, char *host, size_t hn, int *port)
{
    const char *colon = strrchr(c, ':');
    char *end = NULL;
    long p = -1;
    if (colon && colon > c && colon[1]) {
        errno = 0;
        p = strtol(colon + 1, &end, 10);
        if (errno || *end)
            p = -1;
    }
    if (p < (any_port ? 0 : 1) || p > 65535 || (size_t)(colon - c) >= hn)
        return -1;
    snprintf(host, hn, "%.*s", (int)(colon - c), c);
    *port = (int)p;
    return 0;
}

/* 1 when the pattern PAT names the rank (%r; "%%r" is a percent sign and
 * an r). */
int ccs_pattern_names_rank(const char *pat)
{
    for (const char *p = pat; *p; p++) {
        if (p[0] == '%' && p[1] == 'r')
            return 1;
        if (p[0] == '%' && p[1])
            p++;
    }
    return 0;
}

/* CCSHIM_COORD's grammar and CCSHIM_METRICS's pattern (CCSHIM_COALESCE's
 * is coalescing's own, ccs_coalesce_parse: ccshim-run checks it there). */
static int check_syntax(const char *name, const char *v, char *why, size_t n)
{
    if (strcmp(name, "CCSHIM_METRICS") == 0 && *v && !ccs_pattern_names_rank(v)) {
        snprintf(why, n, "expected a pattern that names the rank (%%r), e.g. /var/lib/node_exporter/textfile/"
                         "ccshim-%%j-%%r.prom: every rank would write the same file");
        return -1;
    }
    if (strcmp(name, "CCSHIM_COORD") == 0 && *v) {
        char host[256];
        int port;
        if (ccs_config_parse_coord(v, 1, host, sizeof host, &port) == 0)
            return 0;
        snprintf(why, n, "expected host:port with a port in 0..65535");
        return -1;
    }
    return 0;
}

int ccs_config_check(const char *name, const char *value, char *why, size_t n)
{
    struct ccs_config tmp;
#define CCS_X(field, nm, type, def, help)                                                                      \
    if (strcmp(name, nm) == 0)                                                                                 \
        return set_##type(&tmp.field, value, #field, help, why, n) != 0 ? -1 : check_syntax(name, value, why, n);
    CCS_CONFIG_LIST(CCS_X)
#undef CCS_X
    return -2;
}

int ccs_config_other_name(const char *name)
{
#define CCS_X(nm, who)                                                                                         \
    if (strcmp(name, nm) == 0)                                                                                 \
        return 1;
    CCS_CONFIG_OTHER_NAMES(CCS_X)
#undef CCS_X
    return 0;
}
