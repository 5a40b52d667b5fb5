/*
 * ccs_config.h - parsed CCSHIM_* settings (see config_table.h for the list).
 */
#ifndef CCS_CONFIG_H
#define CCS_CONFIG_H

#include "config_table.h"
#include <stddef.h>

#define CCS_CFG_BOOL int
#define CCS_CFG_INT long
#define CCS_CFG_STR const char *
#define CCS_CFG_ENUM int

struct ccs_config {
#define CCS_X(field, name, type, def, help) CCS_CFG_##type field;
    CCS_CONFIG_LIST(CCS_X)
#undef CCS_X
};

/* The values of the ENUM settings CCSHIM_ON_DESYNC and
 * CCSHIM_DESYNC_TRANSPORT in ccs_cfg: the index of their word in
 * config_table.h ({warn abort}, {auto shm tcp}; tests/desync/test_rules.c
 * checks that they match).  Here, with the settings, because desync and
 * coalescing both follow CCSHIM_ON_DESYNC. */
enum ccs_on_desync { CCS_ON_DESYNC_WARN = 0, CCS_ON_DESYNC_ABORT = 1 };
enum ccs_desync_transport { CCS_DESYNC_AUTO = 0, CCS_DESYNC_SHM = 1, CCS_DESYNC_TCP = 2 };
/* CCSHIM_DESYNC_TREE's values ({auto off on}). */
enum ccs_desync_tree { CCS_DESYNC_TREE_AUTO = 0, CCS_DESYNC_TREE_OFF = 1, CCS_DESYNC_TREE_ON = 2 };

/* The settings in force (defaults until ccs_config_load). */
extern __attribute__((visibility("hidden"))) struct ccs_config ccs_cfg;

/* Reads every CCSHIM_* variable from GETENV (getenv in the library; a fake
 * in tests).  A malformed value is logged once through REPORT, naming the
 * variable, the value and what is accepted, and its default is kept.
 * Returns the number of malformed values. */
__attribute__((visibility("hidden"))) int
ccs_config_load(struct ccs_config *cfg, const char *(*getenv_fn)(const char *),
                void (*report)(const char *msg));

/* One row of the table, for --help and docs. */
struct ccs_config_row {
    const char *name, *type, *def, *help;
};
extern __attribute__((visibility("hidden"))) const struct ccs_config_row ccs_config_rows[];
extern __attribute__((visibility("hidden"))) const size_t ccs_config_nrows;

/* Checks VALUE for setting NAME as the library will parse it (its type,
 * range or words, and CCSHIM_COORD's grammar; CCSHIM_COALESCE's is
 * ccs_coalesce_parse's, in src/coalesce/coalesce_parse.c):
 * 0 when valid; -1 with WHY saying what is accepted; -2 when NAME is no
 * setting of the table.  For ccshim-run, before it launches anything. */
__attribute__((visibility("hidden"))) int ccs_config_check(const char *name, const char *value, char *why,
                                                           size_t n);

/* 1 when NAME is one of CCS_CONFIG_OTHER_NAMES (config_table.h). */
__attribute__((visibility("hidden"))) int ccs_config_other_name(const char *name);
/* 1 when the file pattern PAT names the rank (%r), as CCSHIM_METRICS's must. */
__attribute__((visibility("hidden"))) int ccs_pattern_names_rank(const char *pat);

/* Parses CCSHIM_COORD's "host:port" (port 0 allowed when ANY_PORT): 0 with
 * HOST (HN bytes) and PORT, or -1. */
__attribute__((visibility("hidden"))) int ccs_config_parse_coord(const char *c, int any_port, char *host, size_t hn,
                                                                 int *port);

/* Index of WORD in an ENUM help "{a b c}", or -1. */
__attribute__((visibility("hidden"))) int ccs_config_enum_index(const char *help, const char *word);

#endif
