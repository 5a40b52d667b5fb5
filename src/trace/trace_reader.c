/* trace_reader.c - streaming reader of per-rank traces (see trace_reader.h). */
#include "trace_reader.h"
#include "trace_format.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Chunks larger than this are damage, not data: the writer never makes them. */
#define MAX_CHUNK (64u << 20)
#define META_MAX 8192

struct ccs_trace_reader {
    FILE *f;
    char path[4096];
    struct ccs_trace_header hdr;
    unsigned char *buf; /* payload of the current chunk */
    size_t cap;
    uint32_t type, len, pos; /* current chunk and position in it */
    int seen_end, truncated, damaged;
    uint64_t size; /* of the file when a chunk was found to run past its end */
    uint64_t lost;     /* records of a cut chunk that could not be read */
    char pending[320]; /* said after the salvaged records: why the file ends */
    char meta[META_MAX];
    size_t meta_len;
};

static void seterr(char *err, size_t n, const char *path, const char *what)
{
    if (err && n)
        snprintf(err, n, "%s: %s", path, what);
}

struct ccs_trace_reader *ccs_trace_open(const char *path, char *err, size_t errlen)
{
    struct ccs_trace_reader *r = calloc(1, sizeof *r);
    char msg[256];
    if (!r) {
        seterr(err, errlen, path, "out of memory");
        return NULL;
    }
    snprintf(r->path, sizeof r->path, "%s", path);
    r->f = fopen(path, "rb");
    if (!r->f) {
        snprintf(msg, sizeof msg, "cannot open: %s", strerror(errno));
        goto fail;
    }
    size_t got = fread(&r->hdr, 1, sizeof r->hdr, r->f);
    if (got < 8 || memcmp(r->hdr.magic, CCS_TRACE_MAGIC, 8) != 0) {
        snprintf(msg, sizeof msg, "not a ccshim trace (no %s magic number)", CCS_TRACE_MAGIC);
        goto fail;
    }
    if (got < sizeof r->hdr) {
        snprintf(msg, sizeof msg, "truncated header (%zu of %zu bytes)", got, sizeof r->hdr);
        goto fail;
    }
    if (r->hdr.byteorder != CCS_TRACE_BYTEORDER) {
        snprintf(msg, sizeof msg, "written with the other byte order (0x%08x); read it on a machine of that order",
                 (unsigned)r->hdr.byteorder);
        goto fail;
    }
    if (r->hdr.version > CCS_TRACE_VERSION) {
        snprintf(msg, sizeof msg, "trace format version %u is newer than this tool understands (%u); update ccshim",
                 (unsigned)r->hdr.version, CCS_TRACE_VERSION);
        goto fail;
    }
    /* Version 1's records are a prefix of version 2's (88 of 96 bytes). */
    size_t want = r->hdr.version == 1 ? CCS_TRACE_RECORD_V1_SIZE : sizeof(struct ccs_record);
    if (r->hdr.version == 0 || r->hdr.header_size < sizeof r->hdr || r->hdr.record_size != want) {
        snprintf(msg, sizeof msg, "bad header (version %u, header %u bytes, record %u bytes; expected record %zu)",
                 (unsigned)r->hdr.version, (unsigned)r->hdr.header_size, (unsigned)r->hdr.record_size, want);
        goto fail;
    }
    if (r->hdr.header_size > sizeof r->hdr && fseek(r->f, r->hdr.header_size, SEEK_SET) != 0) {
        snprintf(msg, sizeof msg, "truncated header");
        goto fail;
    }
    return r;
fail:
    seterr(err, errlen, path, msg);
    ccs_trace_close(r);
    return NULL;
}

const struct ccs_trace_header *ccs_trace_hdr(const struct ccs_trace_reader *r) { return &r->hdr; }

int ccs_trace_truncated(const struct ccs_trace_reader *r)
{
    return !r->damaged && (r->truncated || !r->seen_end);
}

int ccs_trace_damaged(const struct ccs_trace_reader *r)
{
    return r->damaged;
}

/* 1 when the file, whose chunk at byte AT runs past its end, still ends
 * with a whole END chunk after that chunk's header: it was written to the
 * end, so the chunk's length (or type) is damage, not a cut.  A process
 * that died leaves a partial chunk at the end, never an END chunk after it.
 * (The format has no checksum: this and the bounds below are what can be
 * told.)  Leaves the file position at the end. */
static int ends_whole(struct ccs_trace_reader *r, uint64_t at)
{
    struct {
        struct ccs_chunk c;
        struct ccs_trace_end e;
    } tail;
    uint64_t want = sizeof tail.c + sizeof tail.e;
    if (r->size < at + sizeof(struct ccs_chunk) + want || fseek(r->f, (long)(r->size - want), SEEK_SET) != 0)
        return 0;
    int whole = fread(&tail.c, sizeof tail.c, 1, r->f) == 1 && fread(&tail.e, sizeof tail.e, 1, r->f) == 1 &&
                tail.c.type == CCS_CHUNK_END && tail.c.length == sizeof tail.e && tail.e.reason <= 3 &&
                tail.e.dropped <= tail.e.records;
    fseek(r->f, 0, SEEK_END);
    return whole;
}

/* Says why a chunk at AT that runs past the end is damage (ends_whole). */
static int past_end_damage(struct ccs_trace_reader *r, uint64_t at, const struct ccs_chunk *c, char *err,
                           size_t errlen)
{
    char msg[300];
    r->damaged = 1;
    r->truncated = 0;
    snprintf(msg, sizeof msg,
             "damaged: the chunk at byte %llu (type %u) claims %u bytes, past the end of the file (%llu bytes), "
             "yet the file ends with a whole END chunk: it was written to the end and a chunk header was "
             "altered",
             (unsigned long long)at, (unsigned)c->type, (unsigned)c->length, (unsigned long long)r->size);
    seterr(err, errlen, r->path, msg);
    return -1;
}

uint64_t ccs_trace_lost(const struct ccs_trace_reader *r)
{
    return r->lost;
}

/* Loads the next chunk's payload; 1 loaded, 0 clean EOF, -1 damaged. */
static int load_chunk(struct ccs_trace_reader *r, char *err, size_t errlen)
{
    struct ccs_chunk c;
    char msg[256];
    if (r->pending[0]) { /* the salvaged part of a cut chunk was read */
        seterr(err, errlen, r->path, r->pending);
        r->pending[0] = 0;
        return -1;
    }
    long pos = ftell(r->f);
    uint64_t at = pos < 0 ? 0 : (uint64_t)pos;
    size_t got = fread(&c, 1, sizeof c, r->f);
    if (got == 0)
        return 0;
    if (got < sizeof c) {
        r->truncated = 1;
        seterr(err, errlen, r->path, "truncated: the file ends inside a chunk header");
        return -1;
    }
    if (c.length > MAX_CHUNK) {
        r->damaged = 1;
        snprintf(msg, sizeof msg, "damaged: chunk of type %u at byte %llu claims %u bytes (at most %u)",
                 (unsigned)c.type, (unsigned long long)at, (unsigned)c.length, MAX_CHUNK);
        seterr(err, errlen, r->path, msg);
        return -1;
    }

    if (c.length + 1 > r->cap) {
        size_t ncap = c.length + 1 < 65536 ? 65536 : (size_t)c.length + 1;
        unsigned char *nb = realloc(r->buf, ncap);
        if (!nb) {
            seterr(err, errlen, r->path, "out of memory");
            return -1;
        }
        r->buf = nb;
        r->cap = ncap;
    }
    got = fread(r->buf, 1, c.length, r->f);
    if (got < c.length) { /* the size now: a trace read while its job runs grows */
        struct stat st;
        if (fstat(fileno(r->f), &st) == 0)
            r->size = (uint64_t)st.st_size;
        if (ends_whole(r, at))
            return past_end_damage(r, at, &c, err, errlen);
    }
    if (got < c.length && c.type == CCS_CHUNK_RECORDS && got >= sizeof(struct ccs_record)) {
        /* Cut by a crash or a full disk: keep the whole records of it. */
        size_t whole = got / sizeof(struct ccs_record), total = c.length / sizeof(struct ccs_record);
        r->truncated = 1;
        r->lost += total - whole;
        snprintf(r->pending, sizeof r->pending,
                 "truncated: the file ends inside a chunk of %zu records; %zu read, %zu lost", total, whole,
                 total - whole);
        r->type = c.type;
        r->len = (uint32_t)(whole * sizeof(struct ccs_record));
        r->pos = 0;
        return 1;
    }
    if (got < c.length) {
        r->truncated = 1;
        if (c.type == CCS_CHUNK_RECORDS)
            r->lost += c.length / sizeof(struct ccs_record);
        snprintf(msg, sizeof msg, "truncated: the file ends inside a chunk (%zu of %u bytes)", got,
                 (unsigned)c.length);
        seterr(err, errlen, r->path, msg);
        return -1;
    }
    r->buf[c.length] = 0;
    r->type = c.type;
    r->len = c.length;
    r->pos = 0;
    return 1;
}

static int bad(struct ccs_trace_reader *r, char *err, size_t errlen, const char *what)
{
    char msg[200];
    r->damaged = 1;
    snprintf(msg, sizeof msg, "damaged %s chunk", what);
    seterr(err, errlen, r->path, msg);
    r->len = r->pos = 0;
    return -1;
}

/* One reader per chunk type of trace_format.h, each the same steps (the
 * fixed part's size, a copy of it, the variable part's bounds) with checks
 * of its own: alike in shape, kept apart so that each type's checks read in
 * one place.  P and LEFT: the unread part of the chunk.  1 with IT filled,
 * or -1 (damaged, ERR set). */
#define CHUNK_READER(name)                                                                                  \
    static int name(struct ccs_trace_reader *r, unsigned char *p, uint32_t left, struct ccs_item *it,        \
                    char *err, size_t errlen)

CHUNK_READER(read_record)
{
    if (left < r->hdr.record_size)
        return bad(r, err, errlen, "records");
    it->type = r->type == CCS_CHUNK_INFLIGHT ? CCS_ITEM_INFLIGHT : CCS_ITEM_RECORD;
    memset(&it->u.record, 0, sizeof it->u.record); /* version 1: no pysite */
    memcpy(&it->u.record, p, r->hdr.record_size);
    r->pos += r->hdr.record_size; /* records: several per chunk */
    return 1;
}

CHUNK_READER(read_comm)
{
    if (left < sizeof(struct ccs_trace_comm))
        return bad(r, err, errlen, "comm");
    it->type = CCS_ITEM_COMM;
    memcpy(&it->u.comm, p, sizeof it->u.comm);
    return 1;
}

CHUNK_READER(read_end)
{
    if (left < sizeof(struct ccs_trace_end))
        return bad(r, err, errlen, "end");
    it->type = CCS_ITEM_END;
    memcpy(&it->u.end, p, sizeof it->u.end);
    r->seen_end = 1;
    return 1;
}

CHUNK_READER(read_meta)
{
    (void)err, (void)errlen;
    it->type = CCS_ITEM_META;
    it->u.meta.text = (const char *)p;
    if (r->meta_len + left < META_MAX) {
        memcpy(r->meta + r->meta_len, p, left);
        r->meta_len += left;
        r->meta[r->meta_len] = 0;
    }
    return 1;
}

CHUNK_READER(read_module)
{
    struct ccs_trace_module m;
    if (left < sizeof m)
        return bad(r, err, errlen, "module");
    memcpy(&m, p, sizeof m);
    if (m.path_len > left - sizeof m)
        return bad(r, err, errlen, "module");
    p[sizeof m + m.path_len] = 0; /* within buf: buf has len+1 bytes */
    it->type = CCS_ITEM_MODULE;
    it->u.module.id = m.id;
    it->u.module.path = (const char *)p + sizeof m;
    return 1;
}

CHUNK_READER(read_site)
{
    struct ccs_trace_site s;
    if (left < sizeof s)
        return bad(r, err, errlen, "site");
    memcpy(&s, p, sizeof s);
    if (s.depth > CCS_MAX_FRAMES || (uint64_t)s.depth * sizeof(struct ccs_trace_frame) > left - sizeof s)
        return bad(r, err, errlen, "site");
    it->type = CCS_ITEM_SITE;
    it->u.site.id = s.id;
    it->u.site.depth = s.depth;
    memcpy(it->u.site.frames, p + sizeof s, s.depth * sizeof(struct ccs_trace_frame));
    /* Symbol names follow the frames back to back, each with its NUL
     * (counted in sym_len).  A name is used only when it lies inside the
     * chunk and ends in a NUL: the lengths are not trusted. */
    size_t off = sizeof s + s.depth * sizeof(struct ccs_trace_frame);
    for (uint32_t i = 0; i < s.depth; i++) {
        uint32_t n = it->u.site.frames[i].sym_len;
        if (n == 0 || off + n > left) {
            it->u.site.symbols[i] = NULL;
            continue;
        }
        it->u.site.symbols[i] = (const char *)p + off;
        off += n;
        if (p[off - 1] != 0)
            it->u.site.symbols[i] = NULL;
    }
    return 1;
}

CHUNK_READER(read_pysite)
{
    struct ccs_trace_pysite s;
    if (left < sizeof s)
        return bad(r, err, errlen, "pysite");
    memcpy(&s, p, sizeof s);
    if (s.id == 0 || s.text_len == 0 || s.text_len > left - sizeof s)
        return bad(r, err, errlen, "pysite");
    unsigned char *t = p + sizeof s;
    t[s.text_len] = 0; /* within buf: buf has len+1 bytes */
    for (uint32_t i = 0; i < s.text_len; i++)
        if (t[i] < 0x20 || t[i] > 0x7e)
            t[i] = '?'; /* the tools print it in tables, HTML, JSON */
    it->type = CCS_ITEM_PYSITE;
    it->u.pysite.id = s.id;
    it->u.pysite.text = (const char *)t;
    return 1;
}

int ccs_trace_next(struct ccs_trace_reader *r, struct ccs_item *it, char *err, size_t errlen)
{
    for (;;) {
        if (r->pos >= r->len) {
            int rc = load_chunk(r, err, errlen);
            if (rc <= 0)
                return rc;
        }
        unsigned char *p = r->buf + r->pos;
        uint32_t left = r->len - r->pos;
        int (*read)(struct ccs_trace_reader *, unsigned char *, uint32_t, struct ccs_item *, char *, size_t);
        switch (r->type) {
        case CCS_CHUNK_RECORDS:
        case CCS_CHUNK_INFLIGHT: /* a later addition: older files have none */
            return read_record(r, p, left, it, err, errlen);
        case CCS_CHUNK_COMM: read = read_comm; break;
        case CCS_CHUNK_END: read = read_end; break;
        case CCS_CHUNK_META: read = read_meta; break;
        case CCS_CHUNK_MODULE: read = read_module; break;
        case CCS_CHUNK_SITE: read = read_site; break;
        case CCS_CHUNK_PYSITE: read = read_pysite; break;
        default:
            r->pos = r->len; /* unknown chunk: skip */
            continue;
        }
        int rc = read(r, p, left, it, err, errlen);
        if (rc > 0)
            r->pos = r->len; /* one item per chunk */
        return rc;
    }
}

const char *ccs_trace_meta(const struct ccs_trace_reader *r, const char *key)
{
    static __thread char val[512];
    size_t kl = strlen(key);
    const char *p = r->meta;
    while (p && *p) {
        const char *nl = strchr(p, '\n');
        size_t ll = nl ? (size_t)(nl - p) : strlen(p);
        if (ll > kl && strncmp(p, key, kl) == 0 && p[kl] == '=') {
            size_t vl = ll - kl - 1;
            if (vl >= sizeof val)
                vl = sizeof val - 1;
            memcpy(val, p + kl + 1, vl);
            val[vl] = 0;
            return val;
        }
        p = nl ? nl + 1 : NULL;
    }
    return NULL;
}

void ccs_trace_close(struct ccs_trace_reader *r)
{
    if (!r)
        return;
    if (r->f)
        fclose(r->f);
    free(r->buf);
    free(r);
}
