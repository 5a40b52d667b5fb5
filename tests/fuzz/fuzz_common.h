/*
 * fuzz_common.h - helpers shared by the libFuzzer targets of tests/fuzz
 * (docs/fuzzing.md): a cursor over the input, so that a target reads its
 * choices and its data from the bytes the fuzzer mutates.
 */
#ifndef CCS_FUZZ_COMMON_H
#define CCS_FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct fz {
    const uint8_t *p;
    size_t n;
};

/* The next byte, 0 once the input is used up. */
static inline uint8_t fz_u8(struct fz *z)
{
    if (!z->n)
        return 0;
    z->n--;
    return *z->p++;
}

static inline uint16_t fz_u16(struct fz *z)
{
    uint16_t lo = fz_u8(z);
    return (uint16_t)(lo | (uint16_t)(fz_u8(z) << 8));
}

/* Up to N bytes (fewer at the end of the input): their start, and *GOT. */
static inline const uint8_t *fz_bytes(struct fz *z, size_t n, size_t *got)
{
    const uint8_t *p = z->p;
    *got = n < z->n ? n : z->n;
    z->p += *got;
    z->n -= *got;
    return p;
}

/* Copies N bytes into OUT, zero-filled past the end of the input. */
static inline void fz_copy(struct fz *z, void *out, size_t n)
{
    size_t got;
    const uint8_t *p = fz_bytes(z, n, &got);
    memcpy(out, p, got);
    memset((unsigned char *)out + got, 0, n - got);
}

#endif
