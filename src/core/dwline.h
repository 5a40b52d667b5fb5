/*
 * dwline.h - the source line of a call as its author wrote it, through
 * elfutils' libdwfl/libdw (libdw.so.1, dlopen'ed RTLD_LOCAL).  One way for
 * every ccshim output that names a call site: the runtime's desync reports
 * (symbolize_dw.c, the live process) and ccshim-audit (tools/audit/symbols.c,
 * the modules' files named in a trace).
 *
 * Two rules, both needed for the line of the call rather than of what
 * follows it:
 *  - a recorded frame is a return address: the call is the instruction
 *    before it, so the address looked up is the return address - 1 (at -O2
 *    the instruction after a call is often on another line: the next
 *    statement, a loop's header, or an inlined helper's first line);
 *  - inside inlined code the line is the one in the outermost function that
 *    was not inlined (where the author called the helper), with the helper
 *    and its own line after it: "main at app.c:40 (inlined allreduce_checked
 *    at app.c:12)".
 */
#ifndef CCS_DWLINE_H
#define CCS_DWLINE_H

#include <config.h>
#include <stddef.h>

#ifdef HAVE_ELFUTILS_LIBDWFL_H
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>

/* The functions used, resolved from the dlopen'ed library. */
struct ccs_dw {
    void *handle;
    __typeof__(dwfl_begin) *begin;
    __typeof__(dwfl_end) *end;
    __typeof__(dwfl_linux_proc_report) *proc_report;
    __typeof__(dwfl_report_begin) *report_begin;
    __typeof__(dwfl_report_end) *report_end;
    __typeof__(dwfl_report_offline) *report_offline;
    __typeof__(dwfl_linux_proc_find_elf) *find_elf;
    __typeof__(dwfl_build_id_find_elf) *build_id_find_elf;
    __typeof__(dwfl_standard_find_debuginfo) *find_debuginfo;
    __typeof__(dwfl_build_id_find_debuginfo) *build_id_find_debuginfo;
    __typeof__(dwfl_offline_section_address) *offline_section_address;
    __typeof__(dwfl_addrmodule) *addrmodule;
    __typeof__(dwfl_module_addrinfo) *addrinfo;
    __typeof__(dwfl_module_getsrc) *getsrc;
    __typeof__(dwfl_lineinfo) *lineinfo;
    __typeof__(dwfl_module_info) *module_info;
    __typeof__(dwfl_module_getelf) *module_getelf;
    __typeof__(dwfl_module_addrdie) *addrdie;
    __typeof__(dwarf_getscopes) *getscopes;
    __typeof__(dwarf_getscopes_die) *getscopes_die;
    __typeof__(dwarf_attr) *attr;
    __typeof__(dwarf_tag) *tag;
    __typeof__(dwarf_attr_integrate) *attr_integrate;
    __typeof__(dwarf_formstring) *formstring;
    __typeof__(dwarf_formudata) *formudata;
    __typeof__(dwarf_getsrcfiles) *getsrcfiles;
    __typeof__(dwarf_filesrc) *filesrc;
};

/* Loads libdw.so.1 into DW.  0, or -1 with the reason in WHY. */
int ccs_dw_load(struct ccs_dw *dw, char *why, size_t n);

/* Where a call is.  FUNC is empty when DWARF names no function (the
 * caller then uses the ELF symbol); FILE empty and LINE 0 without line
 * information; INL_FUNC non-empty when the call is inside inlined code. */
struct ccs_dw_where {
    char func[256];
    char file[512];
    int line;
    char inl_func[256];
    char inl_file[512];
    int inl_line;
};

/* Fills W for the call whose return address is RET (an address of MOD's
 * as DWFL lays it out).  0 when a line was found, -1 otherwise. */
int ccs_dw_where(const struct ccs_dw *dw, Dwfl_Module *mod, Dwarf_Addr ret, struct ccs_dw_where *w);

/* "func at file:line (inlined helper at file:line)" from W, with FALLBACK
 * as the function's name when DWARF gave none; the files' directories are
 * kept.  Returns BUF. */
const char *ccs_dw_where_str(const struct ccs_dw_where *w, const char *fallback, char *buf, size_t n);
#endif

#endif
