/*
 * mktrace.c - test-only generator of synthetic ccshim traces (see
 * tracegen.h).  Usage:
 *   mktrace [options] OUTDIR          a whole job, one trace per rank
 *   mktrace --broken KIND FILE        one invalid file
 */
#include "ccs_kinds.h"
#include "tracegen.h"
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct named_value {
    const char *name;
    unsigned value;
};

static const struct named_value dtypes[] = {{"int32", CCS_DT_INT32},       {"int64", CCS_DT_INT64},
                                            {"uint8", CCS_DT_UINT8},       {"float16", CCS_DT_FLOAT16},
                                            {"bfloat16", CCS_DT_BFLOAT16}, {"float32", CCS_DT_FLOAT32},
                                            {"float64", CCS_DT_FLOAT64}},
                                ops[] = {{"sum", CCS_OP_SUM},
                                         {"avg", CCS_OP_AVG},
                                         {"max", CCS_OP_MAX},
                                         {"min", CCS_OP_MIN},
                                         {"prod", CCS_OP_PROD}};

/* The value of S in TABLE (N rows) into *OUT.  0, or -1 after naming the bad --WHAT. */
static int lookup(const char *what, const struct named_value *table, size_t n, const char *s, unsigned *out)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(s, table[i].name) == 0) {
            *out = table[i].value;
            return 0;
        }
    fprintf(stderr, "mktrace: unknown --%s '%s'\n", what, s);
    return -1;
}

static int usage(void)
{
    fputs("usage: mktrace [--ranks N] [--steps S] [--buckets SIZE,SIZE...] [--micro K] [--no-allgather]\n"
          "               [--deferred] [--no-markers] [--head H] [--desync RANK:STEP] [--no-end RANK]\n"
          "               [--silent RANK|all] [--deferred-from STEP] [--late-sites] [--late RANK:NS]\n"
          "               [--hang RANK] [--unmarked RANK] [--micro-of RANK:K]\n"
          "               [--cut RANK:BYTES] [--dropped N] [--reports] [--job J] [--host H]\n"
          "               [--dtype int32|int64|uint8|float16|bfloat16|float32|float64]\n"
          "               [--op sum|avg|max|min|prod] [--alias SIZE] [--rebuild] OUTDIR\n"
          "       mktrace --broken not-a-trace|newer-version|other-byteorder|truncated-header|damaged-chunk FILE\n",
          stderr);
    return 2;
}

/* --buckets SIZE,SIZE...  0, or 2 after the message. */
static int parse_buckets(struct tg_opts *o, const char *arg)
{
    char *save, *tok, *list = strdup(arg);
    o->nbuckets = 0;
    for (tok = strtok_r(list, ",", &save); tok && o->nbuckets < TG_MAX_BUCKETS; tok = strtok_r(NULL, ",", &save))
        if (tg_parse_size(tok, &o->bucket_bytes[o->nbuckets++]) != 0) {
            fprintf(stderr, "mktrace: bad size '%s'\n", tok);
            free(list);
            return 2;
        }
    free(list);
    return 0;
}

/* Option C with argument ARG into O (--broken into *BROKEN).  0, or the exit status. */
static int apply_option(struct tg_opts *o, int c, char *arg, const char **broken)
{
    switch (c) {
    case 'r':
        o->ranks = atoi(arg);
        break;
    case 's':
        o->steps = atoi(arg);
        break;
    case 'm':
        o->micro = atoi(arg);
        break;
    case 'A':
        o->allgather = 0;
        break;
    case 'd':
        o->deferred = 1;
        break;
    case 'M':
        o->markers = 0;
        break;
    case 'H':
        o->head = atoi(arg);
        break;
    case 'R':
        o->reports = 1;
        break;
    case 'j':
        o->job = arg;
        break;
    case 'h':
        o->host = arg;
        break;
    case 'B':
        *broken = arg;
        break;
    case 'T':
        return lookup("dtype", dtypes, sizeof dtypes / sizeof dtypes[0], arg, &o->dtype) != 0 ? 2 : 0;
    case 'O':
        return lookup("op", ops, sizeof ops / sizeof ops[0], arg, &o->op) != 0 ? 2 : 0;
    case 'a':
        if (tg_parse_size(arg, &o->alias_bytes) != 0) {
            fprintf(stderr, "mktrace: bad --alias size '%s'\n", arg);
            return 2;
        }
        break;
    case 'W':
        o->rebuild = 1;
        break;
    case 'x':
        o->dropped = strtoull(arg, NULL, 10);
        break;
    case 'E':
        o->no_end_rank = atoi(arg);
        break;
    case 'F':
        o->deferred = 1;
        o->deferred_from = atoi(arg);
        break;
    case 'L':
        o->late_sites = 1;
        break;
    case 'g':
        o->hang_rank = atoi(arg);
        break;
    case 'U':
        o->unmarked_rank = atoi(arg);
        break;
    case 'k':
        if (sscanf(arg, "%d:%d", &o->micro_rank, &o->micro_of) != 2 || o->micro_of < 1)
            return usage();
        break;
    case 'l':
        if (sscanf(arg, "%d:%" SCNu64, &o->late_rank, &o->late_ns) != 2)
            return usage();
        break;
    case 'S':
        o->silent_rank = strcmp(arg, "all") == 0 ? -2 : atoi(arg);
        break;
    case 'D':
        if (sscanf(arg, "%d:%d", &o->desync_rank, &o->desync_step) != 2)
            return usage();
        break;
    case 'c':
        if (sscanf(arg, "%d:%ld", &o->cut_rank, &o->cut_bytes) != 2)
            return usage();
        break;
    case 'b':
        return parse_buckets(o, arg);
    default:
        return usage();
    }
    return 0;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"ranks", 1, 0, 'r'},      {"steps", 1, 0, 's'},        {"buckets", 1, 0, 'b'},
        {"micro", 1, 0, 'm'},      {"no-allgather", 0, 0, 'A'}, {"deferred", 0, 0, 'd'},
        {"no-markers", 0, 0, 'M'}, {"head", 1, 0, 'H'},         {"desync", 1, 0, 'D'},
        {"no-end", 1, 0, 'E'},     {"cut", 1, 0, 'c'},          {"dropped", 1, 0, 'x'},
        {"reports", 0, 0, 'R'},    {"job", 1, 0, 'j'},          {"host", 1, 0, 'h'},
        {"broken", 1, 0, 'B'},     {"dtype", 1, 0, 'T'},        {"op", 1, 0, 'O'},
        {"alias", 1, 0, 'a'},      {"rebuild", 0, 0, 'W'},      {"silent", 1, 0, 'S'},
        {"deferred-from", 1, 0, 'F'}, {"late-sites", 0, 0, 'L'},
        {"late", 1, 0, 'l'},       {"hang", 1, 0, 'g'},       {"unmarked", 1, 0, 'U'},
        {"micro-of", 1, 0, 'k'},   {0, 0, 0, 0},
    };
    struct tg_opts o;
    const char *broken = NULL;
    int c, status;
    tg_defaults(&o);
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1)
        if ((status = apply_option(&o, c, optarg, &broken)) != 0)
            return status;
    if (optind != argc - 1 || o.ranks < 1 || o.steps < 0 || o.micro < 1)
        return usage();
    if (broken) {
        if (tg_write_broken(argv[optind], broken) != 0) {
            fprintf(stderr, "mktrace: cannot write %s variant '%s'\n", argv[optind], broken);
            return 1;
        }
        return 0;
    }
    mkdir(argv[optind], 0755);
    if (tg_write_job(argv[optind], &o) != 0) {
        perror("mktrace");
        return 1;
    }
    return 0;
}
