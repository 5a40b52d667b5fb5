/*
 * tr_train.h - the training loop (GradCache, losses across ranks, DDP-style
 * buckets, optimizer) and the one-process reference gradient, each compiled
 * for double (_d) and float (_f) from tr_train.inc / tr_ref.inc.
 */
#ifndef TR_TRAIN_H
#define TR_TRAIN_H

#include "tr_comm.h"
#include "tr_opts.h"

/* Tolerances of --check on the maximum relative error
 * max_i |g_i - ref_i| / max_i |ref_i|, per precision. */
#define TR_CHECK_TOL_DOUBLE 1e-9
#define TR_CHECK_TOL_SINGLE 1e-4

/* Runs the whole training.  Returns the exit status: 0, 1 when --check
 * failed, 3 on an internal error (out of memory, a failed call). */
int tr_train_d(const struct tr_opts *o, struct tr_comm *c);
int tr_train_f(const struct tr_opts *o, struct tr_comm *c);

/* Number of parameters for O (encoder, plus t' and b for SigLIP). */
size_t tr_param_count(const struct tr_opts *o);

/* The synchronised gradient step STEP should produce, computed directly in
 * one process from all WORLD x local_batch rows at once: no GradCache, no
 * buckets, no communication.  P and G hold tr_param_count(O) values.
 * Returns 0 or -1 (out of memory). */
int tr_reference_d(const struct tr_opts *o, int world, long step, const double *p, double *g);
int tr_reference_f(const struct tr_opts *o, int world, long step, const float *p, float *g);

#endif /* TR_TRAIN_H */
