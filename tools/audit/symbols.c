/*
 * symbols.c - names call sites.  The runtime records raw offsets of return
 * addresses (and dladdr names when it had them); here, as each site is
 * first read, its innermost frame gets function and file:line from the
 * module's debug information, the way the runtime's desync reports name it
 * (src/core/dwline.c: the call instruction, return address - 1; inside
 * inlined code the line in the function the author called the helper from).
 * Every output (table, JSON, TSV records, Chrome trace, HTML, OTF2) then
 * prints the same name.
 */
#include "audit.h"
#include "dwline.h"
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

const char *audit_site_source(const struct audit_site *s, char *file, size_t n, uint32_t *line)
{
    if (s->pysite) { /* "file.py:LINE in FUNC": the file is the text before the first ":LINE in " */
        for (const char *p = strchr(s->pysite, ':'); p; p = strchr(p + 1, ':')) {
            char *end;
            unsigned long l = strtoul(p + 1, &end, 10);
            if (end > p + 1 && strncmp(end, " in ", 4) == 0 && l > 0 && l <= UINT32_MAX && p > s->pysite) {
                snprintf(file, n, "%.*s", (int)(p - s->pysite), s->pysite);
                *line = (uint32_t)l;
                return file;
            }
        }
        return NULL;
    }
    if (!s->src_file || !s->src_line)
        return NULL;
    snprintf(file, n, "%s", s->src_file);
    *line = s->src_line;
    return file;
}

#ifdef HAVE_ELFUTILS_LIBDWFL_H
/* Offsets are from the module's load base; a non-PIE executable is linked at
 * its first segment's address, which its debug information uses. */
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

/* One module file opened with libdwfl, kept for the run. */
struct sym_module {
    char *path;
    Dwfl *dwfl;        /* NULL: unreadable or no ELF */
    Dwfl_Module *mod;
    uint64_t base;     /* link_base + libdwfl's bias */
};

struct audit_symbolizer {
    struct ccs_dw dw;
    int state; /* 0 not tried, 1 usable, -1 libdw missing */
    Dwfl_Callbacks cb;
    struct sym_module *mods;
    size_t nmods;
};

static struct sym_module *module_open(struct audit_symbolizer *z, const char *path)
{
    for (size_t i = 0; i < z->nmods; i++)
        if (strcmp(z->mods[i].path, path) == 0)
            return &z->mods[i];
    struct sym_module *n = realloc(z->mods, (z->nmods + 1) * sizeof *n);
    if (!n)
        return NULL;
    z->mods = n;
    struct sym_module *m = &z->mods[z->nmods];
    memset(m, 0, sizeof *m);
    m->path = strdup(path);
    if (!m->path)
        return NULL;
    z->nmods++;
    if (access(path, R_OK) != 0 || !(m->dwfl = z->dw.begin(&z->cb)))
        return m;
    m->mod = z->dw.report_offline(m->dwfl, path, path, -1);
    z->dw.report_end(m->dwfl, NULL, NULL);
    Dwarf_Addr bias = 0;
    if (!m->mod || !z->dw.module_getelf(m->mod, &bias)) {
        z->dw.end(m->dwfl);
        m->dwfl = NULL;
        m->mod = NULL;
        return m;
    }
    m->base = link_base(path) + bias;
    return m;
}

static struct audit_symbolizer *symbolizer(struct audit *a)
{
    struct audit_symbolizer *z = a->symbolizer;
    if (!z) {
        z = a->symbolizer = calloc(1, sizeof *z);
        if (!z)
            return NULL;
    }
    if (z->state == 0) {
        char why[200];
        if (ccs_dw_load(&z->dw, why, sizeof why) != 0) {
            fprintf(stderr, "ccshim-audit: %s: call sites are named by the runtime's dladdr names only\n", why);
            z->state = -1;
        } else {
            z->state = 1;
            z->cb.find_elf = z->dw.build_id_find_elf;
            z->cb.section_address = z->dw.offline_section_address;
            /* As the runtime: no debuginfod server is asked (the network
             * may hang), separate debug information comes from local files. */
            const char *urls = getenv("DEBUGINFOD_URLS");
            z->cb.find_debuginfo = urls && *urls ? z->dw.build_id_find_debuginfo : z->dw.find_debuginfo;
        }
    }
    return z->state == 1 ? z : NULL;
}

void audit_site_resolve(struct audit *a, struct audit_site *s)
{
    if (!a->symbolize || s->resolved || !s->module)
        return;
    struct audit_symbolizer *z = symbolizer(a);
    struct sym_module *m = z ? module_open(z, s->module) : NULL;
    if (!m || !m->mod)
        return;
    struct ccs_dw_where w;
    Dwarf_Addr ret = m->base + s->offset;
    const char *elf_name = NULL;
    GElf_Off off;
    GElf_Sym sym;
    if (ccs_dw_where(&z->dw, m->mod, ret, &w) != 0 && w.func[0] == 0) {
        /* No line: at least the ELF symbol of the call instruction. */
        elf_name = z->dw.addrinfo(m->mod, ret - 1, &off, &sym, NULL, NULL, NULL);
        if (!elf_name)
            return;
    } else if (!w.func[0]) {
        elf_name = z->dw.addrinfo(m->mod, ret - 1, &off, &sym, NULL, NULL, NULL);
    }
    char r[1400];
    ccs_dw_where_str(&w, elf_name ? elf_name : s->symbol, r, sizeof r);
    s->resolved = strdup(r);
    if (w.line > 0 && w.file[0] && (s->src_file = strdup(w.file)))
        s->src_line = (uint32_t)w.line;
}

void audit_symbolizer_free(struct audit *a)
{
    struct audit_symbolizer *z = a->symbolizer;
    if (!z)
        return;
    for (size_t i = 0; i < z->nmods; i++) {
        if (z->mods[i].dwfl)
            z->dw.end(z->mods[i].dwfl);
        free(z->mods[i].path);
    }
    free(z->mods);
    /* libdw stays loaded: unloading buys nothing at exit. */
    free(z);
    a->symbolizer = NULL;
}
#else
void audit_site_resolve(struct audit *a, struct audit_site *s)
{
    (void)a, (void)s;
}

void audit_symbolizer_free(struct audit *a)
{
    (void)a;
}
#endif
