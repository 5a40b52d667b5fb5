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
#include "ccs_config.h"
#include "coalesce.h"
#include "run_choose.h"
#include <config.h>
#include <ctype.h>
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef CCSHIM_LIBDIR
#define CCSHIM_LIBDIR "/usr/local/lib"
#endif

static const char *prog = "ccshim-run";

/* The directory of this program (from /proc/self/exe), and where the
 * libraries and the Python helper are relative to it in the configured
 * layout ("../lib", "../share/ccshim/python"), so that an install under
 * another prefix or a moved tree finds its own files. */
static char exe_dir[PATH_MAX] = "";
static char rel_libdir[PATH_MAX] = "../lib";
static char rel_pythondir[PATH_MAX] = "../share/ccshim/python";

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
            "                     default: --mpi when PROGRAM links an MPI library, or is a Python\n"
            "                     program whose script (or a module beside it that it imports)\n"
            "                     imports mpi4py; else --no-mpi\n"
            "  --set NAME=VALUE   set any CCSHIM_* variable (the table below)\n"
            "  --libdir DIR       where libccshim*.so are (default: CCSHIM_LIBDIR, the build tree,\n"
            "                     %s relative to ccshim-run, then %s)\n"
            "  --torch            mark every PyTorch optimizer step, and --python (a Python helper on\n"
            "                     PYTHONPATH calls ccshim_step_mark from a global optimizer step pre-hook;\n"
            "                     its directory: --python-dir, else\n"
            "                     %s relative to ccshim-run, then %s)\n"
            "  --python           name the Python line behind each collective (torch.distributed's\n"
            "                     and mpi4py's calls: docs/python-sites.md), through the same helper\n"
            "  -v, --verbose      say which library was chosen and why (also at --log-level info)\n"
            "  --print-env        print the environment PROGRAM would get, and exit\n"
            "  --new-secret       print a new random secret (128 bits from libsodium, 32 hex digits)\n"
            "                     for CCSHIM_SECRET_FILE, and exit: umask 077; ccshim-run --new-secret\n"
            "                     > ~/.ccshim-secret\n"
            "  --version          print the version and exit\n"
            "  -h, --help         this help\n\n"
            "Exit status: PROGRAM's; 2 for a bad option or setting; 1 when ccshim cannot be set up (a library\n"
            "or the Python helper not found: PROGRAM is then not run); 126/127 when PROGRAM cannot\n"
            "be executed or found.\n\n"
            "Settings (option, variable, default, meaning); an option sets its variable:\n",
            prog, rel_libdir, CCSHIM_LIBDIR, rel_pythondir, CCSHIM_PYTHONDIR);
    for (size_t i = 0; i < ccs_config_nrows; i++) {
        const struct ccs_config_row *r = &ccs_config_rows[i];
        char opt[64];
        option_of(r->name, opt, sizeof opt);
        fprintf(f, "  %-24s %-28s default '%s'\n      %s%s\n", opt, r->name, r->def,
                strcmp(r->type, "ENUM") == 0 ? "one of " : "", r->help);
    }
    fprintf(f,
            "\nEvery CCSHIM_* variable of the environment is checked before PROGRAM runs: a bad value or\n"
            "an unknown name ends ccshim-run with status 2, naming it and what is accepted.  Set without\n"
            "ccshim-run, a malformed value is reported by the library in one log line and its default is used.\n");
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


#ifndef CCSHIM_BINDIR
#define CCSHIM_BINDIR "/usr/local/bin"
#endif
#ifndef CCSHIM_PKGDATADIR
#define CCSHIM_PKGDATADIR "/usr/local/share/ccshim"
#endif
#ifndef CCSHIM_PYTHONDIR
#define CCSHIM_PYTHONDIR CCSHIM_PKGDATADIR "/python"
#endif
#ifndef CCSHIM_SRC_PYTHONDIR
#define CCSHIM_SRC_PYTHONDIR CCSHIM_PYTHONDIR
#endif

/* Splits an absolute path into normalised components ("." and empty ones
 * dropped, ".." pops); returns their number, at most MAX. */
static int path_parts(const char *path, char parts[][NAME_MAX + 1], int max)
{
    int n = 0;
    while (*path) {
        while (*path == '/')
            path++;
        size_t l = strcspn(path, "/");
        if (l == 0)
            break;
        if (l == 2 && strncmp(path, "..", 2) == 0) {
            if (n > 0)
                n--;
        } else if (!(l == 1 && path[0] == '.') && n < max && l <= NAME_MAX) {
            memcpy(parts[n], path, l);
            parts[n++][l] = 0;
        }
        path += l;
    }
    return n;
}

/* OUT = the relative path from directory FROM to TO (both absolute). */
static void rel_path(const char *from, const char *to, char *out, size_t n)
{
    static char pf[64][NAME_MAX + 1], pt[64][NAME_MAX + 1];
    int nf = path_parts(from, pf, 64), nt = path_parts(to, pt, 64), c = 0;
    size_t o = 0;
    while (c < nf && c < nt && strcmp(pf[c], pt[c]) == 0)
        c++;
    out[0] = 0;
    for (int k = c; k < nf; k++)
        o += (size_t)snprintf(out + o, o < n ? n - o : 0, "%s..", o ? "/" : "");
    for (int k = c; k < nt; k++)
        o += (size_t)snprintf(out + o, o < n ? n - o : 0, "%s%s", o ? "/" : "", pt[k]);
    if (o == 0)
        snprintf(out, n, ".");
}

static void locate_self(void)
{
    char exe[PATH_MAX];
    ssize_t l = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (l > 0) {
        exe[l] = 0;
        snprintf(exe_dir, sizeof exe_dir, "%s", dirname(exe));
    }
    rel_path(CCSHIM_BINDIR, CCSHIM_LIBDIR, rel_libdir, sizeof rel_libdir);
    rel_path(CCSHIM_BINDIR, CCSHIM_PYTHONDIR, rel_pythondir, sizeof rel_pythondir);
}

/* Appends ", PATH" (or "PATH") to the list of places looked at. */
static void tried_add(char *tried, size_t n, const char *path)
{
    size_t l = strlen(tried);
    snprintf(tried + l, n - l, "%s%s", l ? ", " : "", path);
}

/* OUT = DIR, made canonical when it exists (no "bin/../lib" in messages). */
static void set_dir(char *out, size_t n, const char *dir)
{
    char rp[PATH_MAX];
    snprintf(out, n, "%s", realpath(dir, rp) ? rp : dir);
}

static int readable_in(const char *dir, const char *file, char *tried, size_t tn)
{
    char probe[PATH_MAX + NAME_MAX + 2];
    snprintf(probe, sizeof probe, "%s/%s", dir, file);
    tried_add(tried, tn, probe);
    return access(probe, R_OK) == 0;
}

/* The directory holding library NAME, into OUT: --libdir or CCSHIM_LIBDIR
 * when given (only there); else the build tree beside this program (.libs);
 * else the installed layout relative to this program; else the configured
 * libdir.  0, or -1 with every path looked at in TRIED. */
static int find_libdir(const char *given, const char *name, char *out, size_t n, char *tried, size_t tn)
{
    char cand[PATH_MAX * 2 + 16];
    tried[0] = 0;
    if (!given) {
        const char *env = getenv("CCSHIM_LIBDIR");
        given = env && *env ? env : NULL;
    }
    if (given) {
        snprintf(out, n, "%s", given);
        return readable_in(out, name, tried, tn) ? 0 : -1;
    }
    if (exe_dir[0]) {
        char dummy[PATH_MAX * 2] = "";
        snprintf(cand, sizeof cand, "%s/.libs", exe_dir);
        if (readable_in(cand, "libccshim.so", dummy, sizeof dummy)) { /* a build tree */
            snprintf(out, n, "%s", cand);
            return readable_in(out, name, tried, tn) ? 0 : -1;
        }
        snprintf(cand, sizeof cand, "%s/%s", exe_dir, rel_libdir);
        if (readable_in(cand, name, tried, tn)) {
            set_dir(out, n, cand);
            return 0;
        }
    }
    snprintf(out, n, "%s", CCSHIM_LIBDIR);
    return readable_in(out, name, tried, tn) ? 0 : -1;
}

/* The directory of the PyTorch helper, into OUT: --python-dir or
 * CCSHIM_PYTHON_DIR when given (only there); the source tree's tools/python
 * when running from the build tree (LIBDIR ends in .libs); else the
 * installed layout relative to this program; else the configured one.
 * 0, or -1 with every path looked at in TRIED. */
static int find_pythondir(const char *libdir, char *out, size_t n, char *tried, size_t tn)
{
    const char *given = getenv("CCSHIM_PYTHON_DIR");
    size_t l = strlen(libdir);
    char cand[PATH_MAX * 2 + 8];
    tried[0] = 0;
    if (given && *given)
        snprintf(cand, sizeof cand, "%s", given);
    else if (l >= 6 && strcmp(libdir + l - 6, "/.libs") == 0)
        snprintf(cand, sizeof cand, "%s", CCSHIM_SRC_PYTHONDIR);
    else if (exe_dir[0])
        snprintf(cand, sizeof cand, "%s/%s", exe_dir, rel_pythondir);
    else
        snprintf(cand, sizeof cand, "%s", CCSHIM_PYTHONDIR);
    for (int pass = 0; pass < 2; pass++) {
        int a = readable_in(cand, "sitecustomize.py", tried, tn);
        int b = readable_in(cand, "ccshim_torch.py", tried, tn);
        if (a && b) {
            set_dir(out, n, cand);
            return 0;
        }
        /* Not given, not the build tree: the configured directory last. */
        if ((given && *given) || (l >= 6 && strcmp(libdir + l - 6, "/.libs") == 0) ||
            strcmp(cand, CCSHIM_PYTHONDIR) == 0)
            break;
        snprintf(cand, sizeof cand, "%s", CCSHIM_PYTHONDIR);
    }
    return -1;
}

/* Puts VALUE first on the colon-separated list in variable NAME
 * (LD_PRELOAD, PYTHONPATH).  0, or -1. */
static int prepend_to_list(const char *name, const char *value)
{
    const char *old = getenv(name);
    size_t n = strlen(value) + (old ? strlen(old) : 0) + 2;
    char *list = malloc(n);
    if (!list)
        return -1;
    snprintf(list, n, "%s%s%s", value, old && *old ? ":" : "", old && *old ? old : "");
    setenv(name, list, 1);
    free(list);
    return 0;
}

/* The side channel's secret never goes on the command line: every local
 * user reads it there (/proc/PID/cmdline) and could forge a verdict.  1
 * (after saying what to do instead) when NAME is the secret. */
static int refuse_secret_on_command_line(const char *name, const char *how)
{
    if (strcmp(name, "CCSHIM_SECRET") != 0)
        return 0;
    fprintf(stderr,
            "%s: %s: refused: a secret on the command line is readable by every local user (/proc/PID/cmdline); "
            "give --secret-file FILE (yours, mode 0600, at least 32 characters) or set CCSHIM_SECRET in the "
            "environment (under MPI no secret is needed)\n",
            prog, how);
    return 1;
}

/* Levenshtein distance of A and B, case-insensitive, for names (at most
 * 127 characters; longer ones are far from every setting anyway). */
static size_t distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b), row[128];
    if (la > 127 || lb > 127)
        return (size_t)-1;
    for (size_t j = 0; j <= lb; j++)
        row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t sub = diag + (tolower((unsigned char)a[i - 1]) != tolower((unsigned char)b[j - 1]));
            size_t best = up + 1 < row[j - 1] + 1 ? up + 1 : row[j - 1] + 1;
            row[j] = sub < best ? sub : best;
            diag = up;
        }
    }
    return row[lb];
}

/* "; did you mean CCSHIM_X?" for the setting nearest to NAME when it is
 * a near miss (an edit distance of at most 2: a letter dropped, doubled,
 * swapped or mistyped, an underscore left out), or "". */
static const char *did_you_mean(const char *name, char *out, size_t n)
{
    size_t best = (size_t)-1, limit = 2;
    const char *pick = NULL;
    for (size_t i = 0; i < ccs_config_nrows; i++) {
        size_t d = distance(name, ccs_config_rows[i].name);
        if (d < best) {
            best = d;
            pick = ccs_config_rows[i].name;
        }
    }
    if (!pick || best > limit)
        return "";
    snprintf(out, n, "; did you mean %s?", pick);
    return out;
}

/* Every CCSHIM_* variable of the environment (the options have set theirs
 * by now) checked as the library will parse it, before anything runs: one
 * line per bad value or unknown name, naming it and what is accepted.
 * The library itself still fails open (a bad value set after this, or
 * without ccshim-run, is reported there in one log line and its default
 * used).  0, or 2 (the exit status) when any is bad. */
static int check_environment(void)
{
    extern char **environ;
    int bad = 0;
    for (char **e = environ; *e; e++) {
        const char *eq = strchr(*e, '=');
        if (strncmp(*e, "CCSHIM_", 7) != 0 || !eq)
            continue;
        char name[128], why[256], opt[64], hint[160];
        snprintf(name, sizeof name, "%.*s", (int)(eq - *e), *e);
        if (ccs_config_other_name(name))
            continue;
        int rc = ccs_config_check(name, eq + 1, why, sizeof why);
        struct ccs_coalesce_policy pol;
        if (rc == 0 && strcmp(name, "CCSHIM_COALESCE") == 0)
            rc = ccs_coalesce_parse(eq + 1, &pol, why, sizeof why);
        if (rc == -2) {
            fprintf(stderr, "%s: unknown variable %s in the environment%s (see --help for the settings)\n", prog,
                    name, did_you_mean(name, hint, sizeof hint));
            bad = 1;
        } else if (rc != 0) {
            option_of(name, opt, sizeof opt);
            fprintf(stderr, "%s: %s='%.200s%s' (option %s): %s; nothing run\n", prog, name, eq + 1,
                    strlen(eq + 1) > 200 ? "...[truncated]" : "", opt, why);
            bad = 1;
        }
    }
    return bad ? 2 : 0;
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
        char hint[160];
        fprintf(stderr, "%s: --set: unknown variable %s%s (see --help for the list)\n", prog, name,
                did_you_mean(name, hint, sizeof hint));
        return -1;
    }
    if (refuse_secret_on_command_line(name, "--set CCSHIM_SECRET=..."))
        return -1;
    return setenv(name, eq + 1, 1);
}

/* What the options ask for. */
struct run_request {
    int mpi; /* 1 --mpi, 0 --no-mpi, -1 chosen from the program */
    int print_env, torch, python, verbose;
    const char *libdir; /* --libdir, or NULL */
};

/* ARGV[*I] as one of the table's options (--trace-dir DIR or
 * --trace-dir=DIR): sets its variable, moving *I past a separate value.
 * 0, or -1 after the message. */
static int set_table_option(int argc, char **argv, int *i)
{
    const char *arg = argv[*i];
    for (size_t k = 0; k < ccs_config_nrows; k++) {
        char opt[64];
        option_of(ccs_config_rows[k].name, opt, sizeof opt);
        size_t len = strlen(opt);
        if (strncmp(arg, opt, len) != 0 || (arg[len] != 0 && arg[len] != '='))
            continue;
        if (refuse_secret_on_command_line(ccs_config_rows[k].name, opt))
            return -1;
        const char *value = arg[len] == '=' ? arg + len + 1 : (*i + 1 < argc ? argv[++*i] : NULL);
        if (!value) {
            fprintf(stderr, "%s: %s needs a value\n", prog, opt);
            return -1;
        }
        setenv(ccs_config_rows[k].name, value, 1);
        return 0;
    }
    fprintf(stderr, "%s: unknown option '%s' (see --help)\n", prog, arg);
    return -1;
}

/* --new-secret: 128 random bits (libsodium's randombytes, the kernel's
 * CSPRNG) in hex, the 32 characters CCSHIM_SECRET asks for at least: a
 * secret a person chose can be guessed offline from a ticket (about 22 ms
 * an Argon2id guess), this one cannot.  0, or 1 without libsodium. */
static int new_secret(void)
{
    if (sodium_init() < 0) {
        fprintf(stderr, "%s: --new-secret: libsodium cannot be initialised\n", prog);
        return 1;
    }
    unsigned char b[16];
    char hex[2 * sizeof b + 1];
    randombytes_buf(b, sizeof b);
    sodium_bin2hex(hex, sizeof hex, b, sizeof b);
    sodium_memzero(b, sizeof b);
    int ok = printf("%s\n", hex) > 0 && fflush(stdout) == 0;
    sodium_memzero(hex, sizeof hex);
    if (!ok) {
        fprintf(stderr, "%s: --new-secret: cannot write the secret: %s\n", prog, strerror(errno));
        return 1;
    }
    return 0;
}

/* Reads the options into REQ; *PROGRAM is the index of the program in
 * ARGV.  Returns -1 to go on, else the exit status. */
static int parse_options(struct run_request *req, int argc, char **argv, int *program)
{
    int i;
    for (i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "--") == 0) {
            i++;
            break;
        }
        if (arg[0] != '-')
            break;
        if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(arg, "--version") == 0) {
            printf("ccshim-run %s\n", PACKAGE_VERSION);
            return 0;
        } else if (strcmp(arg, "--mpi") == 0) {
            req->mpi = 1;
        } else if (strcmp(arg, "--no-mpi") == 0) {
            req->mpi = 0;
        } else if (strcmp(arg, "-v") == 0 || strcmp(arg, "--verbose") == 0) {
            req->verbose = 1;
        } else if (strcmp(arg, "--torch") == 0) {
            req->torch = 1;
        } else if (strcmp(arg, "--python") == 0) {
            req->python = 1;
        } else if (strcmp(arg, "--new-secret") == 0) {
            return new_secret();
        } else if (strcmp(arg, "--print-env") == 0) {
            req->print_env = 1;
        } else if (strcmp(arg, "--libdir") == 0 && i + 1 < argc) {
            req->libdir = argv[++i];
        } else if (strcmp(arg, "--set") == 0 && i + 1 < argc) {
            if (set_var(argv[++i]) != 0)
                return 2;
        } else if (set_table_option(argc, argv, &i) != 0) {
            return 2;
        }
    }
    if (i >= argc) {
        fprintf(stderr, "%s: no program given\n", prog);
        usage(stderr);
        return 2;
    }
    *program = i;
    return -1;
}

/* Says that LIBNAME was not found in any of TRIED, what was expected, and
 * that PROGRAM was not run (WHY the library was chosen). */
static void report_missing_library(const struct run_request *req, const char *libdir, const char *libname,
                                   const char *tried, const char *program, const char *why)
{
    char other[PATH_MAX * 2 + 48];
    snprintf(other, sizeof other, "%s/%s", libdir, req->mpi ? "libccshim.so" : "libccshim-mpi.so");
    const char *env = getenv("CCSHIM_LIBDIR");
    char expect[3 * PATH_MAX];
    if (req->libdir || (env && *env))
        snprintf(expect, sizeof expect, "expected %s to hold it", req->libdir ? "--libdir" : "CCSHIM_LIBDIR");
    else
        snprintf(expect, sizeof expect,
                 "expected the libraries in %s relative to %s, as `make install` puts them, or give --libdir DIR",
                 rel_libdir, exe_dir[0] ? exe_dir : "ccshim-run");
    fprintf(stderr, "%s: error: %s not found: looked for %s (%s)%s; %s not run (%s chosen: %s)\n", prog, libname,
            tried, expect,
            access(other, R_OK) == 0 ? (req->mpi ? "; libccshim.so is there: built without MPI? give --no-mpi" : "")
                                     : "",
            program, libname, why);
}

/* --torch or --python: puts the Python helper's directory first on
 * PYTHONPATH.  0, or -1 after the message (PROGRAM not run). */
static int use_python_helper(const struct run_request *req, const char *libdir, const char *program)
{
    const char *opt = req->torch ? "--torch" : "--python";
    char pydir[PATH_MAX * 2 + 8], tried[4 * PATH_MAX] = "";
    if (find_pythondir(libdir, pydir, sizeof pydir, tried, sizeof tried) != 0) {
        fprintf(stderr,
                "%s: error: %s: the Python helper (sitecustomize.py and ccshim_torch.py) not found: looked "
                "for %s (expected in %s relative to %s, as `make install` puts it, or give --python-dir DIR); "
                "%s not run\n",
                prog, opt, tried, rel_pythondir, exe_dir[0] ? exe_dir : "ccshim-run", program);
        return -1;
    }
    if (req->verbose)
        fprintf(stderr, "%s: %s: Python helper from %s\n", prog, opt, pydir);
    /* For the library: steps will be marked, so every:N can leave a
     * communicator's first step, DDP's bucket rebuild, to the real
     * reductions (docs/coalescing.md, Limits).  Under --python alone the
     * helper only names lines: 0 keeps its step marking out. */
    setenv("CCSHIM_TORCH_HELPER", req->torch ? "1" : "0", 1);
    return prepend_to_list("PYTHONPATH", pydir);
}

/* --print-env: the variables the program would get from ccshim-run. */
static void print_env(const struct run_request *req)
{
    extern char **environ;
    for (char **e = environ; *e; e++)
        if (strncmp(*e, "CCSHIM_", 7) == 0 || strncmp(*e, "LD_PRELOAD=", 11) == 0 ||
            ((req->torch || req->python) && strncmp(*e, "PYTHONPATH=", 11) == 0))
            printf("%s\n", *e);
}

int main(int argc, char **argv)
{
    struct run_request req = {.mpi = -1};
    int program;
    locate_self();
    int status = parse_options(&req, argc, argv, &program);
    if (status >= 0)
        return status;
    if (check_environment() != 0)
        return 2;
    const char *level = getenv("CCSHIM_LOG_LEVEL");
    if (level && (strcmp(level, "info") == 0 || strcmp(level, "debug") == 0))
        req.verbose = 1;
    char path[PATH_MAX], libdir[PATH_MAX * 2 + 16], lib[PATH_MAX * 2 + 64];
    if (find_program(argv[program], path, sizeof path) != 0) {
        fprintf(stderr, "%s: %s: program not found or not executable\n", prog, argv[program]);
        return 127;
    }
    char why[PATH_MAX + 512] = "", tried[4 * PATH_MAX] = "";
    int guess = 0;
    if (req.mpi < 0)
        req.mpi = run_choose_mpi(path, argv + program, why, sizeof why, &guess);
    else
        snprintf(why, sizeof why, "%s given", req.mpi ? "--mpi" : "--no-mpi");
    const char *libname = req.mpi ? "libccshim-mpi.so" : "libccshim.so";
    if (find_libdir(req.libdir, libname, libdir, sizeof libdir, tried, sizeof tried) != 0) {
        /* Never run the job without ccshim when it was asked for. */
        report_missing_library(&req, libdir, libname, tried, argv[program], why);
        return 1;
    }
    snprintf(lib, sizeof lib, "%s/%s", libdir, libname);
    if (req.verbose || guess)
        fprintf(stderr, "%s: %s %s (%s): %s\n", prog, guess ? "guessing" : "preloading", libname, lib, why);
    if (prepend_to_list("LD_PRELOAD", lib) != 0)
        return 1;
    if ((req.torch || req.python) && use_python_helper(&req, libdir, argv[program]) != 0)
        return 1;
    if (req.print_env) {
        print_env(&req);
        return 0;
    }
    execv(path, argv + program);
    fprintf(stderr, "%s: cannot execute %s: %s\n", prog, path, strerror(errno));
    return 126;
}
