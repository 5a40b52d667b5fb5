/*
 * thread.h - the library's background threads (thread.c): the desync
 * thread, its reporter, abort timer and watchdog, the coordinator, the
 * trace writer, the metrics writer and the NCCL completion poller all
 * start here, so that none takes any of the job's signals.
 */
#ifndef CCS_THREAD_H
#define CCS_THREAD_H

#include "attributes.h"
#include <pthread.h>
#include <stddef.h>

/* Starts FN(ARG) on a detached thread with every signal blocked from its
 * first instruction (the job's signals are not ours to take; blocking them
 * inside FN would leave a window), with a stack of STACK bytes (0: the
 * default).  Returns 0 and the thread in *OUT (when not NULL), or
 * pthread_create's error. */
CCS_HIDDEN int ccs_thread_start(void *(*fn)(void *), void *arg, size_t stack, pthread_t *out);

/* The same, joinable (the caller joins it), with the default stack: the
 * desync coordinator, which its stop joins. */
CCS_HIDDEN int ccs_thread_start_joinable(void *(*fn)(void *), void *arg, pthread_t *out);

#endif
