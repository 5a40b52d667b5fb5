/*
 * ccshim-run - runs one process under the shim: sets LD_PRELOAD and the
 * CCSHIM_* settings, then execs the program.  It wraps one rank
 * (`mpirun -np 4 ccshim-run -- ./app`, `srun ccshim-run -- ./app`) or a
 * launcher that forks its ranks (`ccshim-run -- torchrun ...`): the
 * environment is inherited by every child.
 *
 * Every CCSHIM_* variable of the library's table (src/core/config_table.h) is also
 * an option: CCSHIM_TRACE_DIR is --trace-dir, and so on.
 */
#include <config.h>
#include "ccs_config.h"
#include <ctype.h>
#include <elf.h>
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef CCSHIM_LIBDIR
#define CCSHIM_LIBDIR "/usr/local/lib"
#endif

static const char *prog = "ccshim-run";

/* "CCSHIM_TRACE_DIR" -> "--trace-dir" */
static void option_of(const char *var, char *out, size_t n)
{
    size_t o = 0;
    const char *p = var + strlen("CCSHIM_");
    if (o + 2 < n) {
        out[o++] = '-';
        out[o++] = '-';
    }
    for (; *p && o + 1 < n; p++)
        out[o++] = *p == '_' ? '-' : (char)tolower((unsigned char)*p);
    out[o] = 0;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: %s [options] -- PROGRAM [ARGS...]\n"
            "Runs PROGRAM with libccshim preloaded (one rank; use it under mpirun, srun or torchrun,\n"
            "or around a launcher that forks its ranks).\n\n"
            "Options:\n"
            "  --mpi              preload libccshim-mpi.so (MPI and NCCL interception)\n"
            "  --no-mpi           preload libccshim.so (NCCL only; MPI is never loaded)\n"
            "                     default: --mpi when PROGRAM links an MPI library, else --no-mpi\n"
            "  --set NAME=VALUE   set any CCSHIM_* variable (the table below)\n"
            "  --libdir DIR       where libccshim*.so are (default: CCSHIM_LIBDIR, the build tree, %s)\n"
            "  --torch            mark every PyTorch optimizer step (a Python helper on PYTHONPATH\n"
            "                     calls ccshim_step_mark from a global optimizer step pre-hook)\n"
            "  --print-env        print the environment PROGRAM would get, and exit\n"
            "  --version          print the version and exit\n"
            "  -h, --help         this help\n\n"
            "Settings (option, variable, default, meaning); an option sets its variable:\n",
            prog, CCSHIM_LIBDIR);
    for (size_t i = 0; i < ccs_config_nrows; i++) {
        const struct ccs_config_row *r = &ccs_config_rows[i];
        char opt[64];
        option_of(r->name, opt, sizeof opt);
        fprintf(f, "  %-24s %-28s default '%s'\n      %s%s\n", opt, r->name, r->def,
                strcmp(r->type, "ENUM") == 0 ? "one of " : "", r->help);
    }
    fprintf(f, "\nA malformed value is reported by the library in one log line and its default is used.\n");
}

/* Finds PROGRAM in PATH like execvp; 0 with the path in OUT, or -1. */
static int find_program(const char *name, char *out, size_t n)
{
    if (strchr(name, '/')) {
        snprintf(out, n, "%s", name);
        return access(out, X_OK) == 0 ? 0 : -1;
    }
    const char *path = getenv("PATH");
    if (!path)
        path = "/usr/bin:/bin";
    while (*path) {
        size_t l = strcspn(path, ":");
        snprintf(out, n, "%.*s/%s", (int)l, path, name);
        if (access(out, X_OK) == 0)
            return 0;
        path += l;
        if (*path == ':')
            path++;
    }
    return -1;
}

/* 1 when the ELF file at PATH names an MPI library among its DT_NEEDED. */
static int links_mpi(const char *path)
{
    FILE *f = fopen(path, "rb");
    int found = 0;
    if (!f)
        return 0;
    Elf64_Ehdr eh;
    if (fread(&eh, sizeof eh, 1, f) != 1 || memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
        eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_phnum > 256)
        goto out;
    Elf64_Phdr ph[256];
    if (fseek(f, (long)eh.e_phoff, SEEK_SET) != 0 || fread(ph, sizeof ph[0], eh.e_phnum, f) != eh.e_phnum)
        goto out;
    for (int i = 0; i < eh.e_phnum && !found; i++) {
        if (ph[i].p_type != PT_DYNAMIC || ph[i].p_filesz > (1u << 20))
            continue;
        size_t nd = ph[i].p_filesz / sizeof(Elf64_Dyn);
        Elf64_Dyn *dyn = malloc(ph[i].p_filesz);
        if (!dyn || fseek(f, (long)ph[i].p_offset, SEEK_SET) != 0 || fread(dyn, sizeof *dyn, nd, f) != nd) {
            free(dyn);
            goto out;
        }
        uint64_t strtab = 0;
        for (size_t d = 0; d < nd; d++)
            if (dyn[d].d_tag == DT_STRTAB)
                strtab = dyn[d].d_un.d_ptr;
        /* The string table's address -> file offset through the PT_LOADs. */
        long stroff = -1;
        for (int k = 0; k < eh.e_phnum; k++)
            if (ph[k].p_type == PT_LOAD && strtab >= ph[k].p_vaddr && strtab < ph[k].p_vaddr + ph[k].p_filesz)
                stroff = (long)(strtab - ph[k].p_vaddr + ph[k].p_offset);
        for (size_t d = 0; stroff >= 0 && d < nd && !found; d++) {
            if (dyn[d].d_tag != DT_NEEDED)
                continue;
            char name[256] = "";
            if (fseek(f, stroff + (long)dyn[d].d_un.d_val, SEEK_SET) == 0 && fgets(name, sizeof name, f))
                found = strncmp(name, "libmpi", 6) == 0 || strstr(name, "libmpich") != NULL;
        }
        free(dyn);
    }
out:
    fclose(f);
    return found;
}

/* The directory holding the libraries: --libdir, CCSHIM_LIBDIR, the build
 * tree beside this program (.libs), or the configured libdir. */
static void find_libdir(const char *given, char *out, size_t n)
{
    char exe[PATH_MAX], probe[PATH_MAX + 64];
    if (given) {
        snprintf(out, n, "%s", given);
        return;
    }
    const char *env = getenv("CCSHIM_LIBDIR");
    if (env && *env) {
        snprintf(out, n, "%s", env);
        return;
    }
    ssize_t l = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (l > 0) {
        exe[l] = 0;
        char *dir = dirname(exe);
        snprintf(probe, sizeof probe, "%s/.libs/libccshim.so", dir);
        if (access(probe, R_OK) == 0) {
            snprintf(out, n, "%s/.libs", dir);
            return;
        }
    }
    snprintf(out, n, "%s", CCSHIM_LIBDIR);
}

#ifndef CCSHIM_PYTHONDIR
#define CCSHIM_PYTHONDIR "/usr/local/share/ccshim/python"
#endif
#ifndef CCSHIM_SRC_PYTHONDIR
#define CCSHIM_SRC_PYTHONDIR CCSHIM_PYTHONDIR
#endif

/* --torch: puts the directory of the PyTorch helper (tools/python) first on
 * PYTHONPATH; the source tree's when running from the build tree (LIBDIR
 * ends in .libs), else the installed one.  0, or -1 when it is missing. */
static int prepend_python_helper(const char *libdir)
{
    size_t l = strlen(libdir);
    const char *dir = l >= 6 && strcmp(libdir + l - 6, "/.libs") == 0 ? CCSHIM_SRC_PYTHONDIR : CCSHIM_PYTHONDIR;
    char probe[PATH_MAX + 32];
    snprintf(probe, sizeof probe, "%s/sitecustomize.py", dir);
    if (access(probe, R_OK) != 0) {
        fprintf(stderr, "%s: --torch: %s: %s\n", prog, probe, strerror(errno));
        return -1;
    }
    const char *old = getenv("PYTHONPATH");
    size_t n = strlen(dir) + (old ? strlen(old) : 0) + 2;
    char *pp = malloc(n);
    if (!pp)
        return -1;
    snprintf(pp, n, "%s%s%s", dir, old && *old ? ":" : "", old && *old ? old : "");
    setenv("PYTHONPATH", pp, 1);
    free(pp);
    return 0;
}

static int set_var(const char *assign)
{
    const char *eq = strchr(assign, '=');
    if (!eq || strncmp(assign, "CCSHIM_", 7) != 0) {
        fprintf(stderr, "%s: --set '%s': expected NAME=VALUE with a CCSHIM_* name (see --help)\n", prog, assign);
        return -1;
    }
    char name[128];
    snprintf(name, sizeof name, "%.*s", (int)(eq - assign), assign);
    int known = 0;
    for (size_t i = 0; i < ccs_config_nrows; i++)
        known |= strcmp(ccs_config_rows[i].name, name) == 0;
    if (!known) {
        fprintf(stderr, "%s: --set: unknown variable %s (see --help for the list)\n", prog, name);
        return -1;
    }
    return setenv(name, eq + 1, 1);
}

int main(int argc, char **argv)
{
    int mpi = -1, print_env = 0, torch = 0, i;
    const char *libdir_opt = NULL;
    for (i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) {
            i++;
            break;
        }
        if (a[0] != '-')
            break;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(a, "--version") == 0) {
            printf("ccshim-run %s\n", PACKAGE_VERSION);
            return 0;
        } else if (strcmp(a, "--mpi") == 0) {
            mpi = 1;
        } else if (strcmp(a, "--no-mpi") == 0) {
            mpi = 0;
        } else if (strcmp(a, "--torch") == 0) {
            torch = 1;
        } else if (strcmp(a, "--print-env") == 0) {
            print_env = 1;
        } else if (strcmp(a, "--libdir") == 0 && i + 1 < argc) {
            libdir_opt = argv[++i];
        } else if (strcmp(a, "--set") == 0 && i + 1 < argc) {
            if (set_var(argv[++i]) != 0)
                return 2;
        } else {
            /* --trace-dir DIR or --trace-dir=DIR for every table row. */
            size_t k;
            for (k = 0; k < ccs_config_nrows; k++) {
                char opt[64];
                option_of(ccs_config_rows[k].name, opt, sizeof opt);
                size_t ol = strlen(opt);
                if (strncmp(a, opt, ol) == 0 && (a[ol] == 0 || a[ol] == '=')) {
                    const char *v = a[ol] == '=' ? a + ol + 1 : (i + 1 < argc ? argv[++i] : NULL);
                    if (!v) {
                        fprintf(stderr, "%s: %s needs a value\n", prog, opt);
                        return 2;
                    }
                    setenv(ccs_config_rows[k].name, v, 1);
                    break;
                }
            }
            if (k == ccs_config_nrows) {
                fprintf(stderr, "%s: unknown option '%s' (see --help)\n", prog, a);
                return 2;
            }
        }
    }
    if (i >= argc) {
        fprintf(stderr, "%s: no program given\n", prog);
        usage(stderr);
        return 2;
    }
    char path[PATH_MAX], libdir[PATH_MAX], lib[PATH_MAX + 64];
    if (find_program(argv[i], path, sizeof path) != 0) {
        fprintf(stderr, "%s: %s: program not found or not executable\n", prog, argv[i]);
        return 127;
    }
    if (mpi < 0)
        mpi = links_mpi(path);
    find_libdir(libdir_opt, libdir, sizeof libdir);
    snprintf(lib, sizeof lib, "%s/%s", libdir, mpi ? "libccshim-mpi.so" : "libccshim.so");
    if (access(lib, R_OK) != 0) {
        /* Fail open: run the job without the shim rather than not at all. */
        fprintf(stderr, "%s: warning: %s: %s; running %s without ccshim\n", prog, lib, strerror(errno), argv[i]);
    } else {
        const char *old = getenv("LD_PRELOAD");
        size_t n = strlen(lib) + (old ? strlen(old) : 0) + 2;
        char *pre = malloc(n);
        if (!pre)
            return 1;
        snprintf(pre, n, "%s%s%s", lib, old && *old ? ":" : "", old && *old ? old : "");
        setenv("LD_PRELOAD", pre, 1);
        free(pre);
    }
    if (torch && prepend_python_helper(libdir) != 0)
        return 1;
    if (print_env) {
        extern char **environ;
        for (char **e = environ; *e; e++)
            if (strncmp(*e, "CCSHIM_", 7) == 0 || strncmp(*e, "LD_PRELOAD=", 11) == 0 ||
                (torch && strncmp(*e, "PYTHONPATH=", 11) == 0))
                printf("%s\n", *e);
        return 0;
    }
    execv(path, argv + i);
    fprintf(stderr, "%s: cannot execute %s: %s\n", prog, path, strerror(errno));
    return 126;
}
