/*
 * gpu_cuda.h - the few CUDA driver API functions the GPU checks use, found
 * at run time in libcuda.so.1 (the driver's own library, present on every
 * machine with an NVIDIA driver).  Nothing links libcudart, so the programs
 * run with whatever CUDA runtime the NCCL in use was built with.
 *
 * Header-only on purpose: two small programs include it, each once.
 */
#ifndef GPU_CUDA_H
#define GPU_CUDA_H

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>

typedef int gc_result;            /* CUresult: 0 is CUDA_SUCCESS */
typedef int gc_device;            /* CUdevice */
typedef void *gc_context;         /* CUcontext */
typedef void *gc_stream;          /* CUstream (same object as cudaStream_t) */
typedef unsigned long long gc_ptr; /* CUdeviceptr */

#define GC_NOT_READY 600          /* CUDA_ERROR_NOT_READY */
#define GC_STREAM_NON_BLOCKING 1  /* CU_STREAM_NON_BLOCKING */
#define GC_HOSTALLOC_DEVICEMAP 2  /* CU_MEMHOSTALLOC_DEVICEMAP */
#define GC_WAIT_VALUE_GEQ 0       /* CU_STREAM_WAIT_VALUE_GEQ */

struct gc_api {
    gc_result (*Init)(unsigned);
    gc_result (*DeviceGet)(gc_device *, int);
    gc_result (*PrimaryCtxRetain)(gc_context *, gc_device);
    gc_result (*CtxSetCurrent)(gc_context);
    gc_result (*MemAlloc)(gc_ptr *, size_t);
    gc_result (*MemsetD32)(gc_ptr, unsigned, size_t);
    gc_result (*MemcpyDtoH)(void *, gc_ptr, size_t);
    gc_result (*MemHostAlloc)(void **, size_t, unsigned);
    gc_result (*MemHostGetDevicePointer)(gc_ptr *, void *, unsigned);
    gc_result (*StreamCreate)(gc_stream *, unsigned);
    gc_result (*StreamQuery)(gc_stream);
    gc_result (*StreamSynchronize)(gc_stream);
    gc_result (*StreamWaitValue32)(gc_stream, gc_ptr, uint32_t, unsigned);
};

/* Fills A from libcuda.so.1 and makes device 0's primary context current
 * (the one the CUDA runtime inside NCCL uses too).  Returns 0, or -1 after
 * printing what is missing. */
static int gc_load(struct gc_api *a)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (!h) {
        fprintf(stderr, "no CUDA driver: %s\n", dlerror());
        return -1;
    }
    struct { void **slot; const char *name; } fns[] = {
        {(void **)&a->Init, "cuInit"},
        {(void **)&a->DeviceGet, "cuDeviceGet"},
        {(void **)&a->PrimaryCtxRetain, "cuDevicePrimaryCtxRetain"},
        {(void **)&a->CtxSetCurrent, "cuCtxSetCurrent"},
        {(void **)&a->MemAlloc, "cuMemAlloc_v2"},
        {(void **)&a->MemsetD32, "cuMemsetD32_v2"},
        {(void **)&a->MemcpyDtoH, "cuMemcpyDtoH_v2"},
        {(void **)&a->MemHostAlloc, "cuMemHostAlloc"},
        {(void **)&a->MemHostGetDevicePointer, "cuMemHostGetDevicePointer_v2"},
        {(void **)&a->StreamCreate, "cuStreamCreate"},
        {(void **)&a->StreamQuery, "cuStreamQuery"},
        {(void **)&a->StreamSynchronize, "cuStreamSynchronize"},
        {(void **)&a->StreamWaitValue32, "cuStreamWaitValue32_v2"},
    };
    for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++) {
        *fns[i].slot = dlsym(h, fns[i].name);
        if (!*fns[i].slot && i + 1 == sizeof fns / sizeof fns[0])
            *fns[i].slot = dlsym(h, "cuStreamWaitValue32"); /* drivers before CUDA 12 */
        if (!*fns[i].slot) {
            fprintf(stderr, "libcuda.so.1 lacks %s\n", fns[i].name);
            return -1;
        }
    }
    gc_device dev;
    gc_context ctx;
    gc_result rc;
    if ((rc = a->Init(0)) || (rc = a->DeviceGet(&dev, 0)) || (rc = a->PrimaryCtxRetain(&ctx, dev)) ||
        (rc = a->CtxSetCurrent(ctx))) {
        fprintf(stderr, "no usable CUDA device 0 (CUresult %d)\n", rc);
        return -1;
    }
    return 0;
}

#endif /* GPU_CUDA_H */
