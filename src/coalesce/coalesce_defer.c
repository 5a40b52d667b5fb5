/*
 * coalesce_defer.c - the local answer of a deferred reduction: what the
 * reduction would return if every member held exactly what this rank holds.
 *
 *   SUM        W members each give x:          result W x
 *   AVG        the mean of W copies of x:       result x
 *   PreMulSum  each member gives a x (a on the host): result a W x
 *
 * The factor is computed in double and applied in the buffer's own type,
 * so with W a power of two (and a = 1/W, DDP's scaling) it is exact.
 */
#include "coalesce.h"
#include "ccs_kinds.h"
#include <string.h>

/* IEEE binary16 <-> binary32, round to nearest even. */
float ccs_half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (man << 13); /* inf, nan */
    } else if (exp == 0) {
        if (man == 0) {
            bits = sign;
        } else { /* subnormal: normalise */
            int e = -1;
            do {
                man <<= 1;
                e++;
            } while (!(man & 0x400));
            bits = sign | (uint32_t)(127 - 15 - e) << 23 | (man & 0x3ff) << 13;
        }
    } else {
        bits = sign | (exp + 127 - 15) << 23 | man << 13;
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t ccs_float_to_half(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000;
    int32_t exp = (int32_t)((x >> 23) & 0xff);
    uint32_t man = x & 0x7fffff;
    if (exp == 0xff)
        return (uint16_t)(sign | 0x7c00 | (man ? 0x200 : 0));
    int32_t e = exp - 127 + 15;
    if (e >= 0x1f)
        return (uint16_t)(sign | 0x7c00);
    if (e <= 0) {
        if (e < -10)
            return (uint16_t)sign;
        man |= 0x800000;
        uint32_t shift = (uint32_t)(14 - e);
        uint32_t half = man >> shift, rem = man & ((1u << shift) - 1), mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1)))
            half++;
        return (uint16_t)(sign | half);
    }
    uint32_t half = sign | (uint32_t)e << 10 | man >> 13, rem = man & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (half & 1)))
        half++; /* may carry into the exponent, which is right */
    return (uint16_t)half;
}

float ccs_bf16_to_float(uint16_t h)
{
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t ccs_float_to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffff) > 0x7f800000)
        return (uint16_t)((x >> 16) | 0x40); /* quiet nan */
    x += 0x7fff + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}

/* The loops are unrolled by four so that -O2 turns them into vector
 * multiplications; in place and out of place apart, so that the compiler
 * needs no aliasing check (out-of-place buffers never overlap: MPI and NCCL
 * forbid it). */
#define CCS_SCALE_LOOPS(T)                                                                                     \
    static void scale_inplace_##T(T *o, uint64_t n, T f)                                                       \
    {                                                                                                          \
        uint64_t i = 0;                                                                                        \
        for (; i + 4 <= n; i += 4) {                                                                           \
            o[i] *= f;                                                                                         \
            o[i + 1] *= f;                                                                                     \
            o[i + 2] *= f;                                                                                     \
            o[i + 3] *= f;                                                                                     \
        }                                                                                                      \
        for (; i < n; i++)                                                                                     \
            o[i] *= f;                                                                                         \
    }                                                                                                          \
    static void scale_apart_##T(T *restrict o, const T *restrict x, uint64_t n, T f)                           \
    {                                                                                                          \
        uint64_t i = 0;                                                                                        \
        for (; i + 4 <= n; i += 4) {                                                                           \
            o[i] = f * x[i];                                                                                   \
            o[i + 1] = f * x[i + 1];                                                                           \
            o[i + 2] = f * x[i + 2];                                                                           \
            o[i + 3] = f * x[i + 3];                                                                           \
        }                                                                                                      \
        for (; i < n; i++)                                                                                     \
            o[i] = f * x[i];                                                                                   \
    }
CCS_SCALE_LOOPS(double)
CCS_SCALE_LOOPS(float)

int ccs_coalesce_scale_host(void *out, const void *in, uint64_t count, unsigned dtype, double factor)
{
    switch (dtype) {
    case CCS_DT_FLOAT64:
        if (out == in)
            scale_inplace_double(out, count, factor);
        else
            scale_apart_double(out, in, count, factor);
        return 0;
    case CCS_DT_FLOAT32:
        if (out == in)
            scale_inplace_float(out, count, (float)factor);
        else
            scale_apart_float(out, in, count, (float)factor);
        return 0;
    case CCS_DT_FLOAT16: {
        uint16_t *o = out;
        const uint16_t *x = in;
        for (uint64_t i = 0; i < count; i++)
            o[i] = ccs_float_to_half((float)(factor * ccs_half_to_float(x[i])));
        return 0;
    }
    case CCS_DT_BFLOAT16: {
        uint16_t *o = out;
        const uint16_t *x = in;
        for (uint64_t i = 0; i < count; i++)
            o[i] = ccs_float_to_bf16((float)(factor * ccs_bf16_to_float(x[i])));
        return 0;
    }
    default:
        return -1;
    }
}

/* The PreMulSum scalar a, read from its bytes in DTYPE. */
static int scalar_value(unsigned dtype, uint64_t bits, double *a)
{
    switch (dtype) {
    case CCS_DT_FLOAT64:
        memcpy(a, &bits, 8);
        return 0;
    case CCS_DT_FLOAT32: {
        float f;
        uint32_t b = (uint32_t)bits;
        memcpy(&f, &b, 4);
        *a = f;
        return 0;
    }
    case CCS_DT_FLOAT16:
        *a = ccs_half_to_float((uint16_t)bits);
        return 0;
    case CCS_DT_BFLOAT16:
        *a = ccs_bf16_to_float((uint16_t)bits);
        return 0;
    default:
        return -1;
    }
}

int ccs_coalesce_factor(unsigned op, unsigned dtype, uint64_t scalar, int size, double *factor)
{
    double a;
    switch (op) {
    case CCS_OP_SUM:
        *factor = size;
        return 0;
    case CCS_OP_AVG:
        *factor = 1;
        return 0;
    case CCS_OP_PREMULSUM:
        if (scalar_value(dtype, scalar, &a))
            return -1;
        *factor = a * size;
        return 0;
    default:
        return -1;
    }
}
