/* tr_math_f.c - the numeric kernels in single precision. */
#define TR_SINGLE 1
#include "tr_math.inc"
