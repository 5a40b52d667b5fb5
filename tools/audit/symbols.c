/*
 * symbols.c - names the busiest call sites.  The runtime records raw
 * offsets (and dladdr names when it had them); here, off the hot path, the
 * top sites get function and file:line from addr2line, run once per module
 * with all of that module's offsets.
 */
#include "audit.h"
#include <elf.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *audit_site_name(const struct audit_site *s, char *buf, size_t n)
{
    if (s->pysite && n > 0) { /* "train.py:57 in step | native name" */
        int o = snprintf(buf, n, "%s | ", s->pysite);
        if (o > 0 && (size_t)o < n) {
            struct audit_site native = *s;
            native.pysite = NULL;
            audit_site_name(&native, buf + o, n - (size_t)o);
        }
        return buf;
    }
    if (s->resolved)
        snprintf(buf, n, "%s", s->resolved);
    else if (s->symbol)
        snprintf(buf, n, "%s", s->symbol);
    else if (s->module) {
        const char *b = strrchr(s->module, '/');
        snprintf(buf, n, "%s+0x%" PRIx64, b ? b + 1 : s->module, s->offset);
    } else
        snprintf(buf, n, "site %u", s->index);
    return buf;
}

/* Offsets are from the module's load base; a non-PIE executable is linked at
 * its first segment's address, which addr2line expects added back. */
static uint64_t link_base(const char *path)
{
    FILE *f = fopen(path, "rb");
    Elf64_Ehdr eh;
    uint64_t base = 0;
    if (!f)
        return 0;
    if (fread(&eh, sizeof eh, 1, f) == 1 && memcmp(eh.e_ident, ELFMAG, SELFMAG) == 0 &&
        eh.e_ident[EI_CLASS] == ELFCLASS64 && eh.e_type == ET_EXEC && eh.e_phentsize == sizeof(Elf64_Phdr) &&
        fseek(f, (long)eh.e_phoff, SEEK_SET) == 0) {
        uint64_t lo = UINT64_MAX;
        for (unsigned i = 0; i < eh.e_phnum && i < 256; i++) {
            Elf64_Phdr ph;
            if (fread(&ph, sizeof ph, 1, f) != 1)
                break;
            if (ph.p_type == PT_LOAD && ph.p_vaddr < lo)
                lo = ph.p_vaddr;
        }
        if (lo != UINT64_MAX)
            base = lo & ~(uint64_t)0xfff;
    }
    fclose(f);
    return base;
}

static int have_addr2line(void)
{
    const char *path = getenv("PATH");
    char buf[4096];
    if (!path)
        path = "/usr/bin:/bin";
    while (*path) {
        size_t l = strcspn(path, ":");
        snprintf(buf, sizeof buf, "%.*s/addr2line", (int)l, path);
        if (access(buf, X_OK) == 0)
            return 1;
        path += l + (path[l] == ':');
    }
    return 0;
}

/* Shell-quotes S into OUT ('...' with ' escaped). */
static void quote(const char *s, char *out, size_t n)
{
    size_t o = 0;
    out[o++] = '\'';
    for (; *s && o + 5 < n; s++) {
        if (*s == '\'') {
            memcpy(out + o, "'\\''", 4);
            o += 4;
        } else
            out[o++] = *s;
    }
    out[o++] = '\'';
    out[o] = 0;
}

static int count_cmp(const void *x, const void *y)
{
    const struct audit_site *a = *(struct audit_site *const *)x, *b = *(struct audit_site *const *)y;
    if (a->count != b->count)
        return a->count > b->count ? -1 : 1;
    return a->index < b->index ? -1 : 1;
}

void audit_symbolize(struct audit *a, size_t n)
{
    if (!a->nsites || !have_addr2line())
        return;
    struct audit_site **top = malloc(a->nsites * sizeof *top);
    if (!top)
        return;
    memcpy(top, a->site_list, a->nsites * sizeof *top);
    qsort(top, a->nsites, sizeof *top, count_cmp);
    if (n > a->nsites)
        n = a->nsites;
    for (size_t i = 0; i < n; i++) {
        struct audit_site *s = top[i];
        if (!s->module || s->resolved || access(s->module, R_OK) != 0)
            continue;
        /* Every top site of this module in one addr2line run. */
        uint64_t base = link_base(s->module);
        char q[4200], cmd[8192];
        quote(s->module, q, sizeof q);
        int o = snprintf(cmd, sizeof cmd, "addr2line -f -C -e %s", q);
        struct audit_site *batch[64];
        size_t nb = 0;
        for (size_t j = i; j < n && nb < 64; j++) {
            if (top[j]->module && !top[j]->resolved && strcmp(top[j]->module, s->module) == 0 && o > 0 &&
                (size_t)o + 40 < sizeof cmd) {
                batch[nb++] = top[j];
                o += snprintf(cmd + o, sizeof cmd - (size_t)o, " 0x%" PRIx64, top[j]->offset + base);
            }
        }
        snprintf(cmd + o, sizeof cmd - (size_t)o, " 2>/dev/null");
        FILE *p = popen(cmd, "r");
        if (!p)
            break;
        char fn[1024], loc[2048];
        for (size_t j = 0; j < nb; j++) {
            if (!fgets(fn, sizeof fn, p) || !fgets(loc, sizeof loc, p))
                break;
            fn[strcspn(fn, "\n")] = 0;
            loc[strcspn(loc, "\n")] = 0;
            char *disc = strstr(loc, " (discriminator");
            if (disc)
                *disc = 0;
            int known_fn = strcmp(fn, "??") != 0, known_loc = strncmp(loc, "??", 2) != 0;
            char r[3100];
            if (known_fn && known_loc)
                snprintf(r, sizeof r, "%s at %s", fn, loc);
            else if (known_fn)
                snprintf(r, sizeof r, "%s", fn);
            else
                continue;
            batch[j]->resolved = strdup(r);
        }
        pclose(p);
    }
    free(top);
}
