/*
 * thread.c - starting the library's background threads (thread.h).
 */
#include "thread.h"
#include <signal.h>

static int start(void *(*fn)(void *), void *arg, size_t stack, pthread_t *out, int detached)
{
    pthread_t t;
    pthread_attr_t a;
    sigset_t all, old;
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, detached ? PTHREAD_CREATE_DETACHED : PTHREAD_CREATE_JOINABLE);
    if (stack)
        pthread_attr_setstacksize(&a, stack);
    /* A new thread inherits the creator's mask: block everything around
     * the creation, then give the creator its own mask back. */
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    int rc = pthread_create(&t, &a, fn, arg);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&a);
    if (rc == 0 && out)
        *out = t;
    return rc;
}

int ccs_thread_start(void *(*fn)(void *), void *arg, size_t stack, pthread_t *out)
{
    return start(fn, arg, stack, out, 1);
}

int ccs_thread_start_joinable(void *(*fn)(void *), void *arg, pthread_t *out)
{
    return start(fn, arg, 0, out, 0);
}
