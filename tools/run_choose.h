/*
 * run_choose.h - which library ccshim-run preloads when neither --mpi nor
 * --no-mpi is given (run_choose.c; the rule is in docs/configuration.md).
 */
#ifndef CCS_RUN_CHOOSE_H
#define CCS_RUN_CHOOSE_H

#include <stddef.h>

/* Chooses the library for PROGRAM at PATH run with ARGS (ARGS[0] is the
 * program as given, NULL-terminated): returns 1 for libccshim-mpi.so, 0 for
 * libccshim.so, with the reason in WHY (N bytes); *GUESS is set to 1 when
 * the rule could not tell (the caller then always says so). */
int run_choose_mpi(const char *path, char **args, char *why, size_t n, int *guess);

#endif
