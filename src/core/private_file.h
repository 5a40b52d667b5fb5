/*
 * private_file.h - opening the files ccshim writes where other users may
 * write too (private_file.c): never through a link another user planted,
 * never into a file that is not this user's own.
 */
#ifndef CCS_PRIVATE_FILE_H
#define CCS_PRIVATE_FILE_H

#include "attributes.h"
#include <stddef.h>

/* Opens PATH for writing, mode 0600 when it is created: appended to where
 * APPEND, else emptied.  A symbolic link at PATH is refused (O_NOFOLLOW),
 * and so is an existing file that is not a regular file of this user with
 * one link (a hard link to another file); a new file is created with
 * O_EXCL, so nobody can slip one in between.  Returns the descriptor, or
 * -1 with errno (ELOOP for a link, EPERM for another's file).
 * Async-signal-safe (open, fstat, ftruncate, close). */
CCS_HIDDEN int ccs_open_private(const char *path, int append);

/* For a trace directory DIR that others can write to (a sticky /tmp, a
 * group's scratch directory), the job's own subdirectory in it,
 * DIR/ccshim-UID-JOB, made mode 0700 if absent, into OUT (N bytes): 1.
 * 0 when DIR is this user's alone (OUT untouched), -1 with errno when the
 * subdirectory cannot be made or is not this user's private directory (a
 * link, another's, or open to others: ENOTDIR, EPERM). */
CCS_HIDDEN int ccs_private_subdir(const char *dir, const char *job, char *out, size_t n);

#endif
