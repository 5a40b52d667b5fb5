/*
 * tr_comm.c - the accessors every backend shares (see tr_comm.h): a
 * backend's struct tr_comm begins with a struct tr_comm_common, so a pointer
 * to it, converted, points to that common part (C11 6.7.2.1).
 */
#include "tr_comm.h"

int tr_comm_rank(const struct tr_comm *c)
{
    return ((const struct tr_comm_common *)(const void *)c)->rank;
}

int tr_comm_size(const struct tr_comm *c)
{
    return ((const struct tr_comm_common *)(const void *)c)->size;
}

struct tr_counts *tr_comm_counts(struct tr_comm *c)
{
    return &((struct tr_comm_common *)(void *)c)->counts;
}
