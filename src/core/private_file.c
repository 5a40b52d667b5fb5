/*
 * private_file.c - the files ccshim writes (traces, desync reports, flight
 * dumps, its log) at names anyone can predict, often in a directory anyone
 * can write (/tmp): opened so that a link another local user planted at
 * that name is never followed (it would make the job overwrite or append
 * to a file of the job's user), and kept to the user (0600).
 */
#include "private_file.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

/* 1 when FD is a regular file of this user with no other name. */
static int own_file(int fd)
{
    struct stat st;
    return fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() && st.st_nlink == 1;
}

int ccs_open_private(const char *path, int append)
{
    int mode = O_WRONLY | O_NOFOLLOW | O_CLOEXEC | (append ? O_APPEND : 0);
    for (int tries = 0; tries < 3; tries++) {
        int fd = open(path, mode | O_CREAT | O_EXCL, 0600);
        if (fd >= 0)
            return fd;
        if (errno != EEXIST)
            return -1;
        /* It exists: ours (an earlier run's, or this one's appended to),
         * or planted.  O_NOFOLLOW refuses a symbolic link (ELOOP). */
        fd = open(path, mode);
        if (fd < 0) {
            if (errno == ENOENT)
                continue; /* removed meanwhile: create it again */
            return -1;
        }
        if (!own_file(fd)) {
            close(fd);
            errno = EPERM;
            return -1;
        }
        if (!append && ftruncate(fd, 0) != 0) {
            int e = errno;
            close(fd);
            errno = e;
            return -1;
        }
        return fd;
    }
    errno = EEXIST;
    return -1;
}

/* 1 when others than this user may create files in the directory of ST. */
static int shared(const struct stat *st)
{
    return (st->st_mode & (S_IWOTH | S_IWGRP)) || st->st_uid != geteuid();
}

int ccs_private_subdir(const char *dir, const char *job, char *out, size_t n)
{
    struct stat st;
    if (stat(dir, &st) != 0)
        return -1;
    if (!shared(&st))
        return 0;
    char safe[128];
    size_t k = 0;
    for (const char *s = job; *s && k + 1 < sizeof safe; s++) /* the job id as a file name */
        safe[k++] = (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '.' ||
                            *s == '-' || *s == '_'
                        ? *s
                        : '_';
    safe[k] = 0;
    /* (the uid, not the name: no NSS look-up inside the job's start-up) */
    int w = snprintf(out, n, "%s/ccshim-%u-%s", dir, (unsigned)geteuid(), safe);
    if (w < 0 || (size_t)w >= n) {
        errno = ENAMETOOLONG;
        return -1;
    }
    if (mkdir(out, 0700) != 0 && errno != EEXIST)
        return -1;
    /* Made now, or there before (this job's ranks, an earlier run, or
     * planted): it must be a directory of this user, closed to others. */
    if (lstat(out, &st) != 0)
        return -1;
    if (!S_ISDIR(st.st_mode)) {
        errno = ENOTDIR;
        return -1;
    }
    if (st.st_uid != geteuid() || (st.st_mode & 077)) {
        errno = EPERM;
        return -1;
    }
    return 1;
}
