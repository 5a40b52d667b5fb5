/*
 * mktrace.c - test-only generator of synthetic ccshim traces (see
 * tracegen.h).  Usage:
 *   mktrace [options] OUTDIR          a whole job, one trace per rank
 *   mktrace --broken KIND FILE        one invalid file
 */
#include "tracegen.h"
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int usage(void)
{
    fputs("usage: mktrace [--ranks N] [--steps S] [--buckets SIZE,SIZE...] [--micro K] [--no-allgather]\n"
          "               [--deferred] [--no-markers] [--head H] [--desync RANK:STEP] [--no-end RANK]\n"
          "               [--cut RANK:BYTES] [--dropped N] [--reports] [--job J] [--host H] OUTDIR\n"
          "       mktrace --broken not-a-trace|newer-version|other-byteorder|truncated-header|damaged-chunk FILE\n",
          stderr);
    return 2;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"ranks", 1, 0, 'r'},
        {"steps", 1, 0, 's'},
        {"buckets", 1, 0, 'b'},
        {"micro", 1, 0, 'm'},
        {"no-allgather", 0, 0, 'A'},
        {"deferred", 0, 0, 'd'},
        {"no-markers", 0, 0, 'M'},
        {"head", 1, 0, 'H'},
        {"desync", 1, 0, 'D'},
        {"no-end", 1, 0, 'E'},
        {"cut", 1, 0, 'c'},
        {"dropped", 1, 0, 'x'},
        {"reports", 0, 0, 'R'},
        {"job", 1, 0, 'j'},
        {"host", 1, 0, 'h'},
        {"broken", 1, 0, 'B'},
        {0, 0, 0, 0},
    };
    struct tg_opts o;
    const char *broken = NULL;
    int c;
    tg_defaults(&o);
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'r':
            o.ranks = atoi(optarg);
            break;
        case 's':
            o.steps = atoi(optarg);
            break;
        case 'm':
            o.micro = atoi(optarg);
            break;
        case 'A':
            o.allgather = 0;
            break;
        case 'd':
            o.deferred = 1;
            break;
        case 'M':
            o.markers = 0;
            break;
        case 'H':
            o.head = atoi(optarg);
            break;
        case 'R':
            o.reports = 1;
            break;
        case 'j':
            o.job = optarg;
            break;
        case 'h':
            o.host = optarg;
            break;
        case 'B':
            broken = optarg;
            break;
        case 'x':
            o.dropped = strtoull(optarg, NULL, 10);
            break;
        case 'E':
            o.no_end_rank = atoi(optarg);
            break;
        case 'D':
            if (sscanf(optarg, "%d:%d", &o.desync_rank, &o.desync_step) != 2)
                return usage();
            break;
        case 'c':
            if (sscanf(optarg, "%d:%ld", &o.cut_rank, &o.cut_bytes) != 2)
                return usage();
            break;
        case 'b': {
            char *save, *tok, *s = strdup(optarg);
            o.nbuckets = 0;
            for (tok = strtok_r(s, ",", &save); tok && o.nbuckets < TG_MAX_BUCKETS;
                 tok = strtok_r(NULL, ",", &save))
                if (tg_parse_size(tok, &o.bucket_bytes[o.nbuckets++]) != 0) {
                    fprintf(stderr, "mktrace: bad size '%s'\n", tok);
                    free(s);
                    return 2;
                }
            free(s);
            break;
        }
        default:
            return usage();
        }
    }
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
