/*
 * coalesce_parse.c - CCSHIM_COALESCE's grammar (off, every:N, auto), alone
 * in its file so that ccshim-run checks a value before launch with the
 * code the library parses it with (coalesce_policy.c).
 */
#include "coalesce.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int ccs_coalesce_parse(const char *s, struct ccs_coalesce_policy *p, char *why, size_t n)
{
    memset(p, 0, sizeof *p);
    if (!s || !*s || strcasecmp(s, "off") == 0 || strcmp(s, "0") == 0)
        return 0;
    if (strcasecmp(s, "auto") == 0) {
        p->mode = CCS_COALESCE_AUTO;
        return 0;
    }
    if (strncasecmp(s, "every:", 6) == 0) {
        char *end;
        long v = strtol(s + 6, &end, 10);
        if (end != s + 6 && *end == 0 && v >= 2 && v <= 1000000) {
            p->mode = CCS_COALESCE_EVERY;
            p->every = (uint32_t)v;
            return 0;
        }
        snprintf(why, n, "every:N needs a decimal N in 2..1000000");
        return -1;
    }
    snprintf(why, n, "expected off, every:N or auto");
    return -1;
}
