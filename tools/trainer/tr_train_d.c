/* tr_train_d.c - the training loop and the reference in double precision. */
#include "tr_ref.inc"
#include "tr_train.inc"
