/*
 * trace_format.h - the on-disk per-rank trace (docs/trace-format.md).
 *
 * A trace is a file header followed by chunks.  Every chunk starts with a
 * struct ccs_chunk (type, payload length) so a reader can skip what it does
 * not know and tell a truncated tail from a whole one.  All integers are in
 * the writer's byte order, which the header states; readers refuse the
 * other order rather than guess.
 */
#ifndef CCS_TRACE_FORMAT_H
#define CCS_TRACE_FORMAT_H

#include <stddef.h>
#include <stdint.h>

#define CCS_TRACE_MAGIC "CCSHIMTR" /* 8 bytes, no NUL */
/* The format's version.  2: records of 96 bytes (pysite), PYSITE chunks;
 * INFLIGHT chunks were added compatibly (older readers skip them).  3:
 * records and COMM chunks of backend torch.distributed (the torch helper's
 * collectives on gloo; sig: the torch.distributed call).  Readers take 1
 * and 2 too. */
#define CCS_TRACE_VERSION 3u
#define CCS_TRACE_BYTEORDER 0x01020304u
#define CCS_TRACE_SUFFIX ".cctrace"

struct ccs_trace_header {
    char magic[8];       /* CCS_TRACE_MAGIC */
    uint32_t version;    /* CCS_TRACE_VERSION */
    uint32_t byteorder;  /* CCS_TRACE_BYTEORDER as written by the writer */
    uint32_t header_size;/* sizeof(struct ccs_trace_header) */
    uint32_t record_size;/* sizeof(struct ccs_record) */
    int32_t rank;        /* world rank, -1 when unknown */
    int32_t size;        /* world size, -1 when unknown */
    uint32_t pid;
    uint32_t reserved;
    uint64_t start_realtime_ns; /* CLOCK_REALTIME at start */
    uint64_t start_mono_ns;     /* CLOCK_MONOTONIC at start; record times count from it */
};

enum ccs_chunk_type {
    CCS_CHUNK_META = 1,    /* "key=value\n" text: host, job, exe, version */
    CCS_CHUNK_COMM = 2,    /* struct ccs_trace_comm */
    CCS_CHUNK_MODULE = 3,  /* struct ccs_trace_module + path bytes */
    CCS_CHUNK_SITE = 4,    /* struct ccs_trace_site + frames + symbol names */
    CCS_CHUNK_RECORDS = 5, /* n x struct ccs_record */
    CCS_CHUNK_END = 6,     /* struct ccs_trace_end; the last one wins */
    CCS_CHUNK_EXT = 7,     /* reserved for later features; readers skip it */
    CCS_CHUNK_PYSITE = 8,  /* struct ccs_trace_pysite + text (version 2) */
    CCS_CHUNK_INFLIGHT = 9,/* n x struct ccs_record: calls that had not returned when the
                              process ended (exit or fatal signal); t_dur is the time in them so far */
};

struct ccs_chunk {
    uint32_t type;
    uint32_t length; /* payload bytes that follow */
};

/* One intercepted call.  Fixed size; times in ns from start_mono_ns. */
struct ccs_record {
    uint64_t seq;         /* per-communicator sequence number (collectives) or
                             per-communicator p2p counter (point-to-point) */
    uint64_t comm;        /* communicator identity (same on every member) */
    uint64_t fingerprint; /* in a file: hash of the fields every member must agree on;
                             in a ring: the communicator's running hash through this
                             call, 0 off the collective sequence (record.h) */
    uint64_t bytes;       /* payload bytes this rank contributes */
    uint64_t count;       /* element count as passed */
    uint64_t buf;         /* address of the (receive) buffer, for identity */
    uint64_t t_start;     /* ns */
    uint64_t t_dur;       /* ns inside the call (MPI) or to enqueue (NCCL) */
    uint32_t step;        /* step number from ccshim_step_mark */
    uint32_t site;        /* call-site id (SITE chunk), 0 when unknown */
    int32_t root;         /* root or peer, -1 when none */
    uint16_t kind;        /* enum ccs_kind */
    uint8_t dtype;        /* enum ccs_dtype */
    uint8_t op;           /* enum ccs_op */
    uint8_t flags;        /* enum ccs_flag bits */
    uint8_t backend;      /* enum ccs_backend */
    uint8_t group_depth;  /* ncclGroupStart nesting at the call */
    uint8_t thread;       /* small per-process thread index */
    uint32_t sig;         /* MPI, dtype "derived": hash of the type signature's
                             repeating unit (count is then in bytes); 0 otherwise
                             or when not known */
    /* version 2 (records of 96 bytes; version 1 ended here, at 88) */
    uint32_t pysite;      /* annotated (Python) call-site id (PYSITE chunk), 0 none */
    uint32_t reserved2;
};

#define CCS_TRACE_RECORD_V1_SIZE 88u /* records of version-1 traces */
_Static_assert(sizeof(struct ccs_record) == 96 && offsetof(struct ccs_record, pysite) == CCS_TRACE_RECORD_V1_SIZE,
               "a version-1 record is the first 88 bytes of a version-2 one (docs/trace-format.md)");

struct ccs_trace_comm {
    uint64_t id;        /* identity, the same on every member */
    uint64_t parent;    /* parent identity, 0 for none */
    uint64_t handle;    /* local handle value (for debugging only) */
    int32_t rank;       /* this process's rank in it */
    int32_t size;       /* number of members */
    uint16_t backend;   /* enum ccs_backend */
    uint16_t how;       /* enum ccs_kind of the creating call */
    int32_t color;      /* split color, or -1 */
    uint64_t t_created; /* ns */
};

struct ccs_trace_module {
    uint32_t id;
    uint32_t path_len; /* bytes of path that follow (no NUL) */
};

struct ccs_trace_frame {
    uint32_t module; /* module id, 0 when unknown */
    uint32_t sym_len;/* bytes of symbol name after the frames, 0 when none */
    uint64_t offset; /* pc - module load base */
};

struct ccs_trace_site {
    uint32_t id;
    uint32_t depth; /* frames that follow, then the symbol names in order */
};

/* An annotated call site (ccshim_annotate): "file.py:318 in train_step". */
struct ccs_trace_pysite {
    uint32_t id;       /* referred to by records' pysite (from 1) */
    uint32_t text_len; /* bytes of text that follow (no NUL) */
};

struct ccs_trace_end {
    uint64_t records; /* records written in all */
    uint64_t dropped; /* records lost to ring overflow */
    uint64_t steps;   /* last step number */
    int32_t reason;   /* enum ccs_end_reason */
    int32_t signo;    /* for CCS_END_SIGNAL */
};

enum ccs_end_reason {
    CCS_END_FLUSH = 0,    /* explicit ccshim_flush */
    CCS_END_FINALIZE = 1, /* MPI_Finalize */
    CCS_END_EXIT = 2,     /* normal process exit */
    CCS_END_SIGNAL = 3,   /* fatal signal */
};

#endif
