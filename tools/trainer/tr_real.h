/*
 * tr_real.h - the precision the including file is compiled for.
 *
 * The trainer's numeric code is written once, in *.inc files, against REAL
 * and TR(name), and compiled twice: by a *_d.c file for double and a *_f.c
 * file (which defines TR_SINGLE first) for float.  TR(name) appends _d or _f
 * so both instances link into one program, chosen at run time by
 * --precision.
 */
#ifndef TR_REAL_H
#define TR_REAL_H

#include <math.h>

#ifdef TR_SINGLE
typedef float REAL;
#define TR(name) name##_f
#define TR_DT TR_F32
#define R_EXP expf
#define R_SQRT sqrtf
#define R_TANH tanhf
#define R_LOG1P log1pf
#define R_FABS fabsf
#define GEMM cblas_sgemm
#define TR_PRECISION_NAME "single"
#else
typedef double REAL;
#define TR(name) name##_d
#define TR_DT TR_F64
#define R_EXP exp
#define R_SQRT sqrt
#define R_TANH tanh
#define R_LOG1P log1p
#define R_FABS fabs
#define GEMM cblas_dgemm
#define TR_PRECISION_NAME "double"
#endif

#endif /* TR_REAL_H */
