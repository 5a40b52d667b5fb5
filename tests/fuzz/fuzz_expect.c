/*
 * fuzz_expect.c - libFuzzer target: `ccshim-audit --expect`'s rule parser
 * (tools/audit/expect.c, audit_expect_parse: KIND<=N[/comm|/step|/buffer])
 * on any text.  Checked: a rule is accepted only with a known call kind,
 * a limit that is the number written (nothing lost to overflow) and a known
 * scope, and kept whole or cut within its buffer; a refused rule comes with
 * a message.
 */
#include "audit.h"
#include "ccs_kinds.h"
#include "fuzz_common.h"
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (!s)
        return 0;
    memcpy(s, data, size);
    s[size] = 0;
    struct audit_expect e;
    char err[512] = "";
    if (audit_expect_parse(s, &e, err, sizeof err) == 0) {
        if (e.kind < 0 || ccs_kind_name((unsigned)e.kind)[0] == '?' || ccs_kind_class(e.kind) == CCS_CLASS_MARK)
            abort();
        if (e.scope < EXPECT_COMM || e.scope > EXPECT_BUFFER)
            abort();
        if (!memchr(e.text, 0, sizeof e.text) || strncmp(e.text, s, sizeof e.text - 1) != 0)
            abort();
        /* The limit is the number written after "<=" (leading zeros aside). */
        const char *num = strstr(s, "<=") + 2;
        while (*num == '0' && num[1] >= '0' && num[1] <= '9')
            num++;
        char back[32];
        int n = snprintf(back, sizeof back, "%llu", (unsigned long long)e.limit);
        if (strncmp(num, back, (size_t)n) != 0 || (num[n] >= '0' && num[n] <= '9')) {
            fprintf(stderr, "--expect '%s' accepted with the limit %s\n", s, back);
            abort();
        }
    } else if (!err[0] || !memchr(err, 0, sizeof err)) {
        abort();
    }
    free(s);
    return 0;
}
