/*
 * run_choose.c - which library ccshim-run preloads: libccshim-mpi.so for an
 * ELF program with an MPI library among its DT_NEEDED entries, or a Python
 * program whose source imports mpi4py; libccshim.so otherwise.  It reads
 * files only and executes nothing.
 */
#include <config.h>
#include "run_choose.h"
#include <ctype.h>
#include <elf.h>
#include <libgen.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* 1 when PATH is a 64-bit ELF file. */
static int is_elf(const char *path)
{
    unsigned char id[EI_NIDENT];
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0;
    int ok = fread(id, sizeof id, 1, f) == 1 && memcmp(id, ELFMAG, SELFMAG) == 0;
    fclose(f);
    return ok;
}

/* 1 when the ELF file at PATH names an MPI library among its DT_NEEDED
 * (its name into NEEDED). */
static int links_mpi(const char *path, char *needed, size_t nn)
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
            if (found)
                snprintf(needed, nn, "%s", name);
        }
        free(dyn);
    }
out:
    fclose(f);
    return found;
}

/* ---- Which library: a Python program that uses mpi4py -------------------
 * The rule (docs/configuration.md): PROGRAM is a Python program when its
 * name is python* (python3, python3.11, ...) or it is a script whose #! line
 * names python.  Its source is the script (the first argument that is not
 * an interpreter option), the code of -c, the module of -m found under the
 * current directory, and every further argument that names an existing *.py
 * file (so `python3 -m torch.distributed.run train.py` and `torchrun
 * train.py` are read too).  It uses MPI when that source, or a module beside
 * it that it imports (two levels deep, 64 files at most, 4 MiB each), has an
 * import statement (`import ...` or `from ... import`) naming mpi4py.
 * Nothing is executed: mpi4py imported in some other way is not seen. */
#define SCAN_MAX_FILES 64
#define SCAN_MAX_BYTES (4u << 20)

struct scan {
    int files;               /* files read */
    char hit[PATH_MAX + 64]; /* "FILE imports mpi4py (line N)" */
    char first[PATH_MAX];    /* the first source read, for the message */
    char seen[SCAN_MAX_FILES][PATH_MAX];
};

static int scan_file(const char *path, int depth, struct scan *sc);

static int is_ident(int c)
{
    return isalnum(c) || c == '_';
}

/* 1 when LINE (of length L) names mpi4py as a word. */
static int names_mpi4py(const char *line, size_t l)
{
    for (size_t k = 0; k + 6 <= l; k++)
        if (memcmp(line + k, "mpi4py", 6) == 0 && (k == 0 || !is_ident((unsigned char)line[k - 1])) &&
            (k + 6 == l || !is_ident((unsigned char)line[k + 6])))
            return 1;
    return 0;
}

/* Scans the modules beside DIR that an import line names (their first
 * component, or the names after `from . import`).  1 on a hit. */
static int scan_imported(const char *line, size_t l, const char *dir, int depth, struct scan *sc)
{
    char buf[1024], mod[NAME_MAX + 1], path[PATH_MAX + 2 * NAME_MAX + 16];
    snprintf(buf, sizeof buf, "%.*s", (int)(l < sizeof buf - 1 ? l : sizeof buf - 1), line);
    char *p = buf, *names;
    if (strncmp(p, "from", 4) == 0) {
        p += 4;
        while (*p == ' ' || *p == '\t')
            p++;
        while (*p == '.')
            p++;
        char *imp = strstr(p, " import ");
        if (!imp)
            return 0;
        if (p == imp || *p == ' ')
            names = imp + 8; /* from . import a, b */
        else {
            *imp = 0;
            names = p; /* from a.b import c: a */
        }
    } else {
        names = p + 6; /* import a.b as c, d */
    }
    char *save = NULL; /* strtok_r: scan_file below recurses into this function */
    for (char *tok = strtok_r(names, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        while (*tok == ' ' || *tok == '\t' || *tok == '(')
            tok++;
        size_t ml = 0;
        while (is_ident((unsigned char)tok[ml]) && ml < NAME_MAX)
            ml++;
        if (ml == 0)
            continue;
        memcpy(mod, tok, ml);
        mod[ml] = 0;
        snprintf(path, sizeof path, "%s/%s.py", dir, mod);
        if (access(path, R_OK) != 0)
            snprintf(path, sizeof path, "%s/%s/__init__.py", dir, mod);
        if (access(path, R_OK) == 0 && scan_file(path, depth - 1, sc))
            return 1;
    }
    return 0;
}

/* Scans Python source TEXT read from NAME in directory DIR.  1 on a hit. */
static int scan_text(const char *text, size_t len, const char *name, const char *dir, int depth, struct scan *sc)
{
    size_t off = 0;
    for (int lineno = 1; off < len; lineno++) {
        const char *line = text + off;
        const char *nl = memchr(line, '\n', len - off);
        size_t l = nl ? (size_t)(nl - line) : len - off;
        off += l + 1;
        while (l > 0 && (*line == ' ' || *line == '\t')) {
            line++;
            l--;
        }
        int is_import = (l > 7 && strncmp(line, "import", 6) == 0 && (line[6] == ' ' || line[6] == '\t')) ||
                        (l > 5 && strncmp(line, "from", 4) == 0 && (line[4] == ' ' || line[4] == '\t'));
        if (!is_import)
            continue;
        if (names_mpi4py(line, l)) {
            snprintf(sc->hit, sizeof sc->hit, "%s imports mpi4py (line %d)", name, lineno);
            return 1;
        }
        if (depth > 0 && dir && scan_imported(line, l, dir, depth, sc))
            return 1;
    }
    return 0;
}

static int scan_file(const char *path, int depth, struct scan *sc)
{
    char rp[PATH_MAX];
    if (!realpath(path, rp) || sc->files >= SCAN_MAX_FILES)
        return 0;
    for (int k = 0; k < sc->files; k++)
        if (strcmp(sc->seen[k], rp) == 0)
            return 0;
    snprintf(sc->seen[sc->files++], PATH_MAX, "%s", rp);
    if (!sc->first[0])
        snprintf(sc->first, sizeof sc->first, "%s", path);
    FILE *f = fopen(rp, "rb");
    if (!f)
        return 0;
    char *text = malloc(SCAN_MAX_BYTES);
    size_t len = text ? fread(text, 1, SCAN_MAX_BYTES, f) : 0;
    fclose(f);
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", rp);
    int hit = text && scan_text(text, len, path, dirname(dir), depth, sc);
    free(text);
    return hit;
}

static int is_python_name(const char *path)
{
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    if (strncmp(b, "python", 6) != 0)
        return 0;
    return strspn(b + 6, "0123456789.") == strlen(b + 6);
}

/* 1 when PATH starts with a #! line naming python. */
static int has_python_shebang(const char *path)
{
    char line[256] = "";
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0;
    int ok = fgets(line, sizeof line, f) != NULL;
    fclose(f);
    return ok && line[0] == '#' && line[1] == '!' && strstr(line, "python") != NULL;
}

static int ends_with(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

/* The Python source of a command line (see the rule above): 1 when it
 * imports mpi4py (SC->hit says where), 0 when not. */
static int python_uses_mpi4py(const char *path, char **args, int interp, struct scan *sc)
{
    int k = 1;
    if (!interp) {
        if (scan_file(path, 2, sc))
            return 1;
    } else {
        for (; args[k]; k++) {
            const char *a = args[k];
            if (strcmp(a, "-c") == 0 && args[k + 1]) {
                if (!sc->first[0])
                    snprintf(sc->first, sizeof sc->first, "the -c code");
                if (scan_text(args[k + 1], strlen(args[k + 1]), "the -c code", ".", 2, sc))
                    return 1;
                k += 2;
                break;
            }
            if (strcmp(a, "-m") == 0 && args[k + 1]) {
                char mp[PATH_MAX];
                size_t o = (size_t)snprintf(mp, sizeof mp, "./");
                for (const char *c = args[k + 1]; *c && o + 16 < sizeof mp; c++)
                    mp[o++] = *c == '.' ? '/' : *c;
                mp[o] = 0;
                size_t base = strlen(mp);
                snprintf(mp + base, sizeof mp - base, ".py");
                if (access(mp, R_OK) != 0)
                    snprintf(mp + base, sizeof mp - base, "/__main__.py");
                if (access(mp, R_OK) == 0 && scan_file(mp, 2, sc))
                    return 1;
                k += 2;
                break;
            }
            if (strcmp(a, "-W") == 0 || strcmp(a, "-X") == 0 || strcmp(a, "--check-hash-based-pycs") == 0) {
                k++;
                continue;
            }
            if (strcmp(a, "--") == 0) {
                k++;
                if (args[k] && scan_file(args[k], 2, sc))
                    return 1;
                k++;
                break;
            }
            if (a[0] == '-' && a[1])
                continue;
            if (strcmp(a, "-") != 0 && scan_file(a, 2, sc))
                return 1;
            k++;
            break;
        }
    }
    for (; args[k]; k++)
        if (ends_with(args[k], ".py") && access(args[k], R_OK) == 0 && scan_file(args[k], 2, sc))
            return 1;
    return 0;
}

int run_choose_mpi(const char *path, char **args, char *why, size_t n, int *guess)
{
    static struct scan sc;
    char needed[256] = "";
    *guess = 0;
    if (links_mpi(path, needed, sizeof needed)) {
        snprintf(why, n, "%s links %s", path, needed);
        return 1;
    }
    int interp = is_python_name(path);
    if (interp || has_python_shebang(path)) {
        memset(&sc, 0, sizeof sc);
        if (python_uses_mpi4py(path, args, interp, &sc)) {
            snprintf(why, n, "Python program: %s", sc.hit);
            return 1;
        }
        *guess = 1;
        if (sc.files == 0 && !sc.first[0])
            snprintf(why, n,
                     "Python program whose source could not be read (stdin, or a -m module outside the "
                     "current directory): no sign of mpi4py; give --mpi if it uses MPI");
        else
            snprintf(why, n,
                     "Python program: %s does not import mpi4py, nor do the %d module(s) beside it that it "
                     "imports; give --mpi if it uses MPI another way",
                     sc.first, sc.files > 0 ? sc.files - 1 : 0);
        return 0;
    }
    if (is_elf(path)) {
        snprintf(why, n, "%s links no MPI library", path);
        return 0;
    }
    *guess = 1;
    snprintf(why, n,
             "%s is neither an ELF program nor a Python program: cannot tell whether it uses MPI; "
             "give --mpi if it does",
             path);
    return 0;
}
