/*
 * real.c - finding the real implementation of an intercepted function.
 * First the next definition after ours (dlsym RTLD_NEXT); then, for a
 * library the job loaded privately (Python loads extension libraries with
 * RTLD_LOCAL, so RTLD_NEXT cannot see them), the library itself, looked up
 * with RTLD_NOLOAD so that nothing is ever loaded on our account.
 */
#include "real.h"
#include <stddef.h>
#include <dlfcn.h>

void *ccs_real_symbol(const char *name, const char *const *sonames)
{
    void *p = dlsym(RTLD_NEXT, name);
    if (p || !sonames)
        return p;
    for (; *sonames; sonames++) {
        void *h = dlopen(*sonames, RTLD_LAZY | RTLD_NOLOAD);
        if (!h)
            continue;
        p = dlsym(h, name);
        dlclose(h); /* drops only the reference NOLOAD took */
        if (p)
            return p;
    }
    return NULL;
}
