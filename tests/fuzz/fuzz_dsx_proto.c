/*
 * fuzz_dsx_proto.c - libFuzzer target: the side channel's decoders
 * (src/desync/desync_proto.c) on raw bytes, below framing and sealing:
 * a frame header, a STATUS payload (count, then encoded statuses) as the
 * coordinator walks it, a VERDICT as a client checks it, and a status as
 * read from shared memory, and an AGG payload (the tree's fold of a group,
 * src/desync/desync_agg.c) as the root would read it.  The first byte
 * picks the world size (1..256).  A status that decodes must re-encode,
 * and decode again from that, and the identity of a torch.distributed call
 * it names (foreign_*) be whole; an AGG frame that decodes must re-encode
 * and decode alike, and the fold of its listed statuses (valid ones) must
 * be a frame the decoder accepts.
 * fuzz_dsx_coord.c and fuzz_dsx_client.c drive the same decoders through
 * the handshake and sealed frames.
 */
#include "ccs_kinds.h"
#include "desync_agg.h"
#include "desync_proto.h"
#include "fuzz_common.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define AGG_CAP 8 /* listed statuses decoded per frame here */

/* The bytes as an AGG payload. */
static void fuzz_agg(const uint8_t *data, size_t size, int32_t wsize)
{
    char why[256];
    struct ccs_dsx_agg *a = malloc(sizeof *a), *b = malloc(sizeof *b);
    struct ccs_dsx_status *ls = malloc(AGG_CAP * sizeof *ls), *ls2 = malloc(AGG_CAP * sizeof *ls2);
    const struct ccs_dsx_status *sp[AGG_CAP];
    uint32_t idx[AGG_CAP];
    size_t cap = 1 << 16;
    unsigned char *buf = malloc(cap);
    if (!a || !b || !ls || !ls2 || !buf)
        goto out;
    if (ccs_dsx_agg_decode(data, size, wsize, a, ls, AGG_CAP, why, sizeof why) == 0) {
        for (uint32_t i = 0; i < a->head.nlisted; i++)
            sp[i] = &ls[i], idx[i] = i;
        size_t n = ccs_dsx_agg_encode(a, sp, idx, NULL, NULL, buf, cap);
        if (n && (n != ccs_dsx_agg_encoded_size(a, sp, idx) ||
                  ccs_dsx_agg_decode(buf, n, wsize, b, ls2, AGG_CAP, why, sizeof why) != 0 ||
                  memcmp(&a->head, &b->head, sizeof a->head) != 0 ||
                  memcmp(a->comm, b->comm, a->head.ncomm * sizeof a->comm[0]) != 0))
            abort();
        const struct ccs_dsx_agg *f[2] = {a, a};
        struct ccs_dsx_agg_cmp cmp;
        for (uint32_t i = 0; i < a->head.ncomm; i++)
            ccs_dsx_agg_compare(f, 2, a->comm[i].id, 1000, &cmp);
        /* What a relay would fold of those statuses is a valid frame. */
        uint32_t nl = a->head.nlisted;
        memset(b, 0, sizeof *b);
        ccs_dsx_agg_fold(sp, nl, 500, b, idx);
        n = ccs_dsx_agg_encode(b, sp, idx, NULL, NULL, buf, cap);
        if (n && ccs_dsx_agg_decode(buf, n, wsize, a, ls2, AGG_CAP, why, sizeof why) != 0) {
            fprintf(stderr, "fold of %u valid statuses refused: %s\n", nl, why);
            abort();
        }
    }
out:
    free(a), free(b), free(ls), free(ls2), free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char why[256];
    if (size < 1)
        return 0;
    int32_t wsize = 1 + data[0];
    data++, size--;
    if (size >= sizeof(struct ccs_dsx_frame)) {
        struct ccs_dsx_frame f;
        memcpy(&f, data, sizeof f);
        ccs_dsx_check_frame(&f, why, sizeof why);
    }
    struct ccs_dsx_status *st = malloc(sizeof *st);
    if (!st)
        return 0;
    /* A STATUS payload as the coordinator walks it. */
    if (size >= 4) {
        uint32_t cnt;
        memcpy(&cnt, data, 4);
        size_t o = 4;
        for (uint32_t i = 0; i < cnt && o < size; i++) {
            size_t used = ccs_dsx_decode_status(data + o, size - o, wsize, st, why, sizeof why);
            if (!used)
                break;
            /* A decoded status is valid: it re-encodes in the size
             * announced, and that decodes again.  (Not to the same bytes:
             * the encoder sends the call-site texts only when they are
             * wanted, the decoder takes them whenever flagged.) */
            /* A torch.distributed call's identity that passed is whole,
             * of kinds the rules can compare and name. */
            if (st->foreign_gseq &&
                (!st->foreign_group || !st->foreign_ms || ccs_torch_call_name(st->foreign_kind)[0] == '?' ||
                 !ccs_torch_call_name(st->foreign_kind)[0] || ccs_torch_call_name(st->foreign_prev)[0] == '?'))
                abort();
            size_t need = ccs_dsx_encoded_size(st);
            unsigned char *buf = malloc(need);
            struct ccs_dsx_status *again = malloc(sizeof *again);
            if (buf && again) {
                size_t w = ccs_dsx_encode_status(st, NULL, NULL, buf, need);
                if (w != need || ccs_dsx_decode_status(buf, w, wsize, again, why, sizeof why) != w)
                    abort();
            }
            free(buf);
            free(again);
            o += used;
        }
    }
    /* A status from shared memory: the whole struct, checked in place. */
    if (size >= sizeof *st) {
        memcpy(st, data, sizeof *st);
        ccs_dsx_check_status(st, wsize, why, sizeof why);
    }
    free(st);
    fuzz_agg(data, size, wsize);
    if (size >= sizeof(struct ccs_dsx_verdict)) {
        struct ccs_dsx_verdict *v = malloc(sizeof *v);
        if (v) {
            memcpy(v, data, sizeof *v);
            ccs_dsx_check_verdict(v, wsize, why, sizeof why);
            free(v);
        }
    }
    return 0;
}
