/* tr_math_d.c - the numeric kernels in double precision. */
#include "tr_math.inc"
