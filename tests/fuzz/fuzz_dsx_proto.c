/*
 * fuzz_dsx_proto.c - libFuzzer target: the side channel's decoders
 * (src/desync/desync_proto.c) on raw bytes, below framing and sealing:
 * a frame header, a STATUS payload (count, then encoded statuses) as the
 * coordinator walks it, a VERDICT as a client checks it, and a status as
 * read from shared memory.  The first byte picks the world size (1..256).
 * A status that decodes must re-encode, and decode again from that, and
 * the identity of a torch.distributed call it names (foreign_*) be whole.
 * fuzz_dsx_coord.c and fuzz_dsx_client.c drive the same decoders through
 * the handshake and sealed frames.
 */
#include "ccs_kinds.h"
#include "desync_proto.h"
#include "fuzz_common.h"
#include <stdlib.h>
#include <string.h>

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
