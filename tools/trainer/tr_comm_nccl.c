/*
 * tr_comm_nccl.c - the NCCL backend (ccshim-trainer-nccl, no MPI linked).
 *
 * Rank and world size come from RANK / WORLD_SIZE (default 0 / 1), as
 * torchrun sets them; rank 0 publishes the ncclUniqueId in --nccl-id-file
 * (written to a temporary name, then renamed, so a reader never sees half of
 * it) and the others poll for it.
 *
 * --device cuda (default): each host buffer the trainer hands over gets a
 * device mirror of its own, allocated once and found again by the host
 * address, so every reduction of a bucket uses the same device buffer, as
 * DDP's buckets do; values are copied in, reduced on one stream, copied out.
 * --device host: NCCL is called on the host buffers themselves and no CUDA
 * function is called at all, for host-memory implementations of the NCCL
 * API in tests.  When such an implementation completes its calls
 * asynchronously, it has loaded a CUDA driver (the test one, tests/cuda):
 * then each result is waited for with that driver's cuStreamSynchronize on
 * the legacy stream, as a GPU program waits for its stream.
 */
#include "tr_comm.h"
#include "tr_opts.h"

#include <cuda_runtime.h>
#include <dlfcn.h>
#include <errno.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define TR_MIRRORS 64
#define TR_ID_WAIT_S 120

struct tr_mirror {
    const void *host;
    size_t bytes;
    void *dev;
};

struct tr_comm {
    struct tr_comm_common common; /* first: rank, size, counts (tr_comm.c) */
    int host_mode;
    ncclComm_t comm;
    cudaStream_t stream;
    int nmir;
    struct tr_mirror mir[TR_MIRRORS];
};

static const char *prog = "ccshim-trainer-nccl";

static int nccl_ok(const char *what, ncclResult_t rc)
{
    if (rc == ncclSuccess)
        return 0;
    fprintf(stderr, "%s: %s failed: %s\n", prog, what, ncclGetErrorString(rc));
    return -1;
}

static int cuda_ok(const char *what, cudaError_t rc)
{
    if (rc == cudaSuccess)
        return 0;
    fprintf(stderr, "%s: %s failed: %s\n", prog, what, cudaGetErrorString(rc));
    return -1;
}

static ncclDataType_t nccl_type(enum tr_dtype dt)
{
    return dt == TR_F64 ? ncclFloat64 : ncclFloat32;
}
static size_t dt_size(enum tr_dtype dt)
{
    return dt == TR_F64 ? 8 : 4;
}

static int env_int(const char *name, int dflt, int lo, int *out)
{
    const char *s = getenv(name);
    if (!s || !*s) {
        *out = dflt;
        return 0;
    }
    char *end;
    long v = strtol(s, &end, 10);
    if (*end || v < lo || v > 1 << 20) {
        fprintf(stderr, "%s: invalid %s='%s' (expected an integer >= %d)\n", prog, name, s, lo);
        return -1;
    }
    *out = (int)v;
    return 0;
}

static int publish_id(const char *path, const ncclUniqueId *id)
{
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f || fwrite(id, sizeof *id, 1, f) != 1 || fclose(f) || rename(tmp, path)) {
        fprintf(stderr, "%s: cannot write the NCCL id to %s: %s\n", prog, path, strerror(errno));
        return -1;
    }
    return 0;
}

static int fetch_id(const char *path, ncclUniqueId *id)
{
    for (int i = 0; i < TR_ID_WAIT_S * 100; i++) {
        FILE *f = fopen(path, "rb");
        if (f) {
            size_t n = fread(id, sizeof *id, 1, f);
            fclose(f);
            if (n == 1)
                return 0;
        }
        nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
    }
    fprintf(stderr, "%s: no NCCL id appeared in %s after %d s (is rank 0 running?)\n", prog, path, TR_ID_WAIT_S);
    return -1;
}

struct tr_comm *tr_comm_init(int *argc, char ***argv, const struct tr_opts *o)
{
    (void)argc;
    (void)argv;
    struct tr_comm *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    if (env_int("RANK", 0, 0, &c->common.rank) || env_int("WORLD_SIZE", 1, 1, &c->common.size))
        exit(2);
    if (c->common.rank >= c->common.size) {
        fprintf(stderr, "%s: RANK=%d is not below WORLD_SIZE=%d\n", prog, c->common.rank, c->common.size);
        exit(2);
    }
    if (c->common.size > 1 && !o->nccl_id_file) {
        fprintf(stderr, "%s: WORLD_SIZE=%d needs --nccl-id-file PATH to share the ncclUniqueId\n", prog,
                c->common.size);
        exit(2);
    }
    c->host_mode = o->device_host;
    if (!c->host_mode) {
        int ndev = 0, local;
        if (cuda_ok("cudaGetDeviceCount", cudaGetDeviceCount(&ndev)) || ndev < 1 ||
            env_int("LOCAL_RANK", c->common.rank % (ndev > 0 ? ndev : 1), 0, &local) ||
            cuda_ok("cudaSetDevice", cudaSetDevice(local % ndev)) ||
            cuda_ok("cudaStreamCreate", cudaStreamCreate(&c->stream))) {
            fprintf(stderr, "%s: no usable CUDA device (use --device host for a host NCCL)\n", prog);
            free(c);
            return NULL;
        }
    }
    ncclUniqueId id;
    if (c->common.rank == 0) {
        if (nccl_ok("ncclGetUniqueId", ncclGetUniqueId(&id)) ||
            (c->common.size > 1 && publish_id(o->nccl_id_file, &id))) {
            free(c);
            return NULL;
        }
    } else if (fetch_id(o->nccl_id_file, &id)) {
        free(c);
        return NULL;
    }
    if (nccl_ok("ncclCommInitRank", ncclCommInitRank(&c->comm, c->common.size, id, c->common.rank))) {
        free(c);
        return NULL;
    }
    return c;
}

const char *tr_comm_backend(const struct tr_comm *c)
{
    return c->host_mode ? "nccl-host" : "nccl";
}
/* The buffer NCCL works on for HOST: HOST itself in host mode, else its
 * device mirror (allocated on first use, reallocated only if it grows). */
static void *dev_of(struct tr_comm *c, const void *host, size_t bytes)
{
    if (c->host_mode)
        return (void *)host;
    for (int i = 0; i < c->nmir; i++)
        if (c->mir[i].host == host) {
            if (c->mir[i].bytes >= bytes)
                return c->mir[i].dev;
            cudaFree(c->mir[i].dev);
            c->mir[i].bytes = 0;
            if (cuda_ok("cudaMalloc", cudaMalloc(&c->mir[i].dev, bytes)))
                return NULL;
            c->mir[i].bytes = bytes;
            return c->mir[i].dev;
        }
    if (c->nmir == TR_MIRRORS) {
        fprintf(stderr, "%s: more than %d distinct buffers\n", prog, TR_MIRRORS);
        return NULL;
    }
    struct tr_mirror *m = &c->mir[c->nmir];
    if (cuda_ok("cudaMalloc", cudaMalloc(&m->dev, bytes)))
        return NULL;
    m->host = host;
    m->bytes = bytes;
    c->nmir++;
    return m->dev;
}

static int to_dev(struct tr_comm *c, void *dev, const void *host, size_t bytes)
{
    return c->host_mode
               ? 0
               : cuda_ok("cudaMemcpyAsync", cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, c->stream));
}

/* --device host: waits for an asynchronous host NCCL (see above). */
static int host_wait(void)
{
    static int (*sync)(void *);
    static int looked;
    if (!looked) {
        looked = 1;
        void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
        if (h)
            *(void **)&sync = dlsym(h, "cuStreamSynchronize");
    }
    if (sync && sync(NULL) != 0) {
        fprintf(stderr, "%s: cuStreamSynchronize failed (the asynchronous NCCL reported an error)\n", prog);
        return -1;
    }
    return 0;
}

static int from_dev(struct tr_comm *c, void *host, const void *dev, size_t bytes)
{
    if (c->host_mode)
        return host_wait();
    return cuda_ok("cudaMemcpyAsync", cudaMemcpyAsync(host, dev, bytes, cudaMemcpyDeviceToHost, c->stream)) ||
           cuda_ok("cudaStreamSynchronize", cudaStreamSynchronize(c->stream));
}

int tr_comm_allreduce_sum(struct tr_comm *c, void *buf, void *recv, size_t count, enum tr_dtype dt)
{
    size_t bytes = count * dt_size(dt);
    void *d = dev_of(c, buf, bytes), *r = recv ? dev_of(c, recv, bytes) : d;
    c->common.counts.allreduce++;
    if (!d || !r || to_dev(c, d, buf, bytes) ||
        nccl_ok("ncclAllReduce", ncclAllReduce(d, r, count, nccl_type(dt), ncclSum, c->comm, c->stream)))
        return -1;
    return from_dev(c, recv ? recv : buf, r, bytes);
}

int tr_comm_allgather(struct tr_comm *c, const void *send, void *recv, size_t count, enum tr_dtype dt)
{
    size_t bytes = count * dt_size(dt);
    void *s = dev_of(c, send, bytes), *r = dev_of(c, recv, bytes * c->common.size);
    c->common.counts.allgather++;
    if (!s || !r || to_dev(c, s, send, bytes) ||
        nccl_ok("ncclAllGather", ncclAllGather(s, r, count, nccl_type(dt), c->comm, c->stream)))
        return -1;
    return from_dev(c, recv, r, bytes * c->common.size);
}

int tr_comm_ring_shift(struct tr_comm *c, const void *send, void *recv, size_t count, enum tr_dtype dt)
{
    size_t bytes = count * dt_size(dt);
    int right = (c->common.rank + 1) % c->common.size,
        left = (c->common.rank + c->common.size - 1) % c->common.size;
    void *s = dev_of(c, send, bytes), *r = dev_of(c, recv, bytes);
    c->common.counts.send++;
    c->common.counts.recv++;
    if (!s || !r || to_dev(c, s, send, bytes) || nccl_ok("ncclGroupStart", ncclGroupStart()))
        return -1;
    int rc = nccl_ok("ncclSend", ncclSend(s, count, nccl_type(dt), right, c->comm, c->stream));
    rc |= nccl_ok("ncclRecv", ncclRecv(r, count, nccl_type(dt), left, c->comm, c->stream));
    rc |= nccl_ok("ncclGroupEnd", ncclGroupEnd());
    return rc ? -1 : from_dev(c, recv, r, bytes);
}

int tr_comm_finalize(struct tr_comm *c)
{
    int rc = nccl_ok("ncclCommDestroy", ncclCommDestroy(c->comm));
    if (!c->host_mode) {
        for (int i = 0; i < c->nmir; i++)
            cudaFree(c->mir[i].dev);
        cudaStreamDestroy(c->stream);
    }
    free(c);
    return rc;
}

void tr_comm_abort(struct tr_comm *c, int code)
{
    ncclCommAbort(c->comm);
    exit(code);
}
