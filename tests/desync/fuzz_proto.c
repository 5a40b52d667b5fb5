/* fuzz_proto.c - libFuzzer target for everything a peer can send: a
 * frame header, a STATUS payload (count + encoded statuses), a VERDICT.
 * Built and run for ~10 s by desync-fuzz.sh (clang -fsanitize=fuzzer). */
#include "desync_proto.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char why[256];
    if (size >= sizeof(struct ccs_dsx_frame)) {
        struct ccs_dsx_frame f;
        memcpy(&f, data, sizeof f);
        ccs_dsx_check_frame(&f, why, sizeof why);
    }
    /* A STATUS payload as the coordinator walks it. */
    if (size >= 4) {
        uint32_t cnt;
        memcpy(&cnt, data, 4);
        size_t o = 4;
        struct ccs_dsx_status *st = malloc(sizeof *st);
        for (uint32_t i = 0; st && i < cnt && o < size; i++) {
            size_t used = ccs_dsx_decode_status(data + o, size - o, 64, st, why, sizeof why);
            if (!used)
                break;
            /* A decoded status is fully valid: re-encoding must fit. */
            unsigned char *buf = malloc(ccs_dsx_encoded_size(st));
            if (buf && ccs_dsx_encode_status(st, NULL, NULL, buf, ccs_dsx_encoded_size(st)) == 0)
                abort();
            free(buf);
            o += used;
        }
        free(st);
    }
    if (size >= sizeof(struct ccs_dsx_verdict)) {
        struct ccs_dsx_verdict *v = malloc(sizeof *v);
        if (v) {
            memcpy(v, data, sizeof *v);
            ccs_dsx_check_verdict(v, 64, why, sizeof why);
            free(v);
        }
    }
    return 0;
}
