/*
 * nccl_absent.c - a program that does not use NCCL, for checking that the
 * preloaded shim loads neither NCCL nor CUDA on its own, and that an
 * intercepted function with no real NCCL behind it fails cleanly.
 *
 *   nccl_absent          prints which of libnccl / libcuda / libcudart are mapped
 *   nccl_absent call     also calls ncclAllReduce and ncclCommShrink (twice)
 *                        found with dlsym(RTLD_DEFAULT), printing their results
 *
 * Output: "KEY=VALUE" lines.  Function results are "absent" when no library
 * in the process defines the name.
 */
#include <dlfcn.h>
#include <nccl.h>
#include <stdio.h>
#include <string.h>

/* 1 when a mapped file's name contains NAME (from /proc/self/maps). */
static int mapped(const char *name)
{
    char line[4096];
    int found = 0;
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f)
        return -1;
    while (fgets(line, sizeof line, f))
        if (strstr(line, name))
            found = 1;
    fclose(f);
    return found;
}

static void print_maps(void)
{
    printf("libnccl=%d\n", mapped("libnccl"));
    printf("libcuda=%d\n", mapped("libcuda.so"));
    printf("libcudart=%d\n", mapped("libcudart"));
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "call") == 0) {
        __typeof__(&ncclAllReduce) allreduce = (__typeof__(&ncclAllReduce))dlsym(RTLD_DEFAULT, "ncclAllReduce");
        __typeof__(&ncclCommShrink) shrink = (__typeof__(&ncclCommShrink))dlsym(RTLD_DEFAULT, "ncclCommShrink");
        float x = 1;
        if (allreduce)
            printf("allreduce=%d\n", (int)allreduce(&x, &x, 1, ncclFloat32, ncclSum, NULL, NULL));
        else
            printf("allreduce=absent\n");
        for (int i = 0; i < 2; i++) {
            ncclComm_t out = NULL;
            if (shrink)
                printf("shrink=%d\n", (int)shrink(NULL, NULL, 0, &out, NULL, 0));
            else
                printf("shrink=absent\n");
        }
    }
    print_maps();
    return 0;
}
