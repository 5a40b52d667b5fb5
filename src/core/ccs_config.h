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

/* Index of WORD in an ENUM help "{a b c}", or -1. */
__attribute__((visibility("hidden"))) int ccs_config_enum_index(const char *help, const char *word);

#endif
