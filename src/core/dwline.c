/*
 * dwline.c - the source line of a call as its author wrote it (dwline.h),
 * shared by the runtime's desync reports and ccshim-audit so that both name
 * one address alike.
 */
#include "dwline.h"

#ifdef HAVE_ELFUTILS_LIBDWFL_H
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int ccs_dw_load(struct ccs_dw *dw, char *why, size_t n)
{
    memset(dw, 0, sizeof *dw);
    void *h = dlopen("libdw.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (!h) {
        snprintf(why, n, "libdw.so.1 (elfutils) not found (%s)", dlerror());
        return -1;
    }
#define DW(field, name) (*(void **)&dw->field = dlsym(h, #name)) != NULL
    int ok = DW(begin, dwfl_begin) && DW(end, dwfl_end) && DW(proc_report, dwfl_linux_proc_report) &&
             DW(report_begin, dwfl_report_begin) && DW(report_end, dwfl_report_end) &&
             DW(report_offline, dwfl_report_offline) && DW(find_elf, dwfl_linux_proc_find_elf) &&
             DW(build_id_find_elf, dwfl_build_id_find_elf) && DW(find_debuginfo, dwfl_standard_find_debuginfo) &&
             DW(build_id_find_debuginfo, dwfl_build_id_find_debuginfo) &&
             DW(offline_section_address, dwfl_offline_section_address) && DW(addrmodule, dwfl_addrmodule) &&
             DW(addrinfo, dwfl_module_addrinfo) && DW(getsrc, dwfl_module_getsrc) && DW(lineinfo, dwfl_lineinfo) &&
             DW(module_info, dwfl_module_info) && DW(module_getelf, dwfl_module_getelf) &&
             DW(addrdie, dwfl_module_addrdie) && DW(getscopes, dwarf_getscopes) &&
             DW(getscopes_die, dwarf_getscopes_die) && DW(attr, dwarf_attr) && DW(tag, dwarf_tag) &&
             DW(attr_integrate, dwarf_attr_integrate) && DW(formstring, dwarf_formstring) &&
             DW(formudata, dwarf_formudata) && DW(getsrcfiles, dwarf_getsrcfiles) && DW(filesrc, dwarf_filesrc);
#undef DW
    if (!ok) {
        snprintf(why, n, "libdw.so.1 lacks a libdwfl/libdw function");
        dlclose(h);
        memset(dw, 0, sizeof *dw);
        return -1;
    }
    dw->handle = h;
    return 0;
}

/* The name the author gave DIE (through its abstract origin for an
 * inlined instance), or NULL. */
static const char *die_name(const struct ccs_dw *dw, Dwarf_Die *die)
{
    Dwarf_Attribute at;
    return dw->formstring(dw->attr_integrate(die, DW_AT_name, &at));
}

static int is_function(int tag)
{
    return tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine || tag == DW_TAG_entry_point;
}

int ccs_dw_where(const struct ccs_dw *dw, Dwfl_Module *mod, Dwarf_Addr ret, struct ccs_dw_where *w)
{
    memset(w, 0, sizeof *w);
    if (ret == 0)
        return -1;
    Dwarf_Addr a = ret - 1; /* the call instruction, not the one it returns to */
    int line = 0;
    const char *file = NULL;
    Dwfl_Line *l = dw->getsrc(mod, a);
    if (l)
        file = dw->lineinfo(l, NULL, &line, NULL, NULL, NULL);
    if (file && line > 0) {
        snprintf(w->file, sizeof w->file, "%s", file);
        w->line = line;
    }
    /* The lexical scopes of the call: its innermost scope, then (from that
     * DIE, so the chain runs through the callers rather than the inlined
     * functions' own definitions) up to the function that was not inlined. */
    Dwarf_Addr bias = 0;
    Dwarf_Die *cu = dw->addrdie(mod, a, &bias), *scopes = NULL, inner;
    int n = cu ? dw->getscopes(cu, a - bias, &scopes) : 0;
    if (n <= 0) {
        free(scopes);
        return w->line > 0 ? 0 : -1;
    }
    inner = scopes[0];
    free(scopes);
    scopes = NULL;
    n = dw->getscopes_die(&inner, &scopes);
    Dwarf_Files *files = NULL;
    if (n > 0 && dw->getsrcfiles(cu, &files, NULL) != 0)
        files = NULL;
    int first_inline = -1;
    for (int i = 0; i < n; i++) {
        int tag = dw->tag(&scopes[i]);
        if (!is_function(tag))
            continue;
        const char *nm = die_name(dw, &scopes[i]);
        if (tag != DW_TAG_inlined_subroutine) { /* the function the call is really in */
            snprintf(w->func, sizeof w->func, "%s", nm ? nm : "");
            break;
        }
        if (first_inline < 0) { /* the helper the author called, and the call's line in it */
            first_inline = i;
            snprintf(w->inl_func, sizeof w->inl_func, "%s", nm ? nm : "??");
            snprintf(w->inl_file, sizeof w->inl_file, "%s", w->file);
            w->inl_line = w->line;
        }
        /* Where it was called from: one level out, up to the real function. */
        Dwarf_Attribute at;
        Dwarf_Word v = 0;
        const char *cf = NULL;
        if (files && dw->formudata(dw->attr(&scopes[i], DW_AT_call_file, &at), &v) == 0)
            cf = dw->filesrc(files, v, NULL, NULL);
        if (dw->formudata(dw->attr(&scopes[i], DW_AT_call_line, &at), &v) == 0 && v > 0) {
            w->line = (int)v;
            snprintf(w->file, sizeof w->file, "%s", cf ? cf : "??");
        }
    }
    free(scopes);
    return w->line > 0 ? 0 : -1;
}

const char *ccs_dw_where_str(const struct ccs_dw_where *w, const char *fallback, char *buf, size_t n)
{
    const char *fn = w->func[0] ? w->func : fallback ? fallback : "??";
    int o = w->line > 0 ? snprintf(buf, n, "%s at %s:%d", fn, w->file, w->line) : snprintf(buf, n, "%s", fn);
    if (w->inl_func[0] && o > 0 && (size_t)o < n) {
        if (w->inl_line > 0)
            snprintf(buf + o, n - (size_t)o, " (inlined %s at %s:%d)", w->inl_func, w->inl_file, w->inl_line);
        else
            snprintf(buf + o, n - (size_t)o, " (inlined %s)", w->inl_func);
    }
    return buf;
}
#endif
