/* tr_train_f.c - the training loop and the reference in single precision. */
#define TR_SINGLE 1
#include "tr_ref.inc"
#include "tr_train.inc"
