/*
 * desync_shm.c - the shared-memory transport (docs/desync.md, "Transport").
 *
 * /dev/shm/ccshim-dsx-<uid>-<hash of job, host key, secret, size>, created
 * O_EXCL with mode 0600 by the first rank; the others open it, check that it
 * belongs to their user and is private, and wait for the creator to mark it
 * ready.  A segment left by a crashed earlier job with the same name (no
 * live process in it) is replaced, under flock, so two ranks cannot both
 * replace it.  Whether a process is in it is told by a lock, not a pid:
 * every process that attached holds a shared open-file-description lock
 * on its first byte for as long as it lives (the kernel drops it when the
 * process is gone), which holds across PID namespaces (one container per
 * rank, /dev/shm shared), where pids mean nothing.
 */
#include "desync_shm.h"
#include "desync_search.h"
#include "desync_claim.h"
#include "log.h"
#include "clock.h"
#include "fingerprint.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define NVERDICT 16
#define NAGREED 32
#define NWANT (2 * CCS_DSX_NSEARCH) /* a probe and a request for records of every search at once */
#define WANT_MS 2000
#define PROBE_MS 1000
#define READY 0x52454459u /* "READY" */

struct vslot {
    _Atomic uint64_t gen;
    struct ccs_dsx_verdict v;
};

struct aslot {
    _Atomic uint64_t gen;
    struct ccs_dsx_agree a;
};

struct header {
    _Atomic uint32_t ready;
    uint32_t version;
    int32_t wsize;
    uint32_t slot_size;
    _Atomic int32_t attached; /* ranks that attached so far */
    _Atomic int32_t live;     /* ranks attached and not yet closed */
    _Atomic int32_t leader; /* the leading world rank + 1; 0 none */
    uint32_t pad;
    _Atomic uint64_t nverdict; /* verdicts posted so far */
    struct vslot verdict[NVERDICT];
    _Atomic uint64_t nagreed;
    struct aslot agreed[NAGREED];
    /* Records asked for by the coordinator (ccs_dsx_shm_want). */
    _Atomic uint64_t want_comm[NWANT], want_seq[NWANT], want_until[NWANT];
    _Atomic uint32_t nwant;
    _Atomic uint32_t bye;
    /* The host's own search (ccs_dsx_shm_set_search): its last pass's
     * time in ms, shifted left by one, | 1 when settled. */
    _Atomic uint64_t search;
    /* Who of this host logs each verdict (desync_claim.h). */
    struct ccs_dsx_claims claims;
};

struct slot {
    _Atomic uint64_t gen; /* odd while being written */
    struct ccs_dsx_status st;
    _Atomic uint64_t agen;
    uint64_t anext;
    uint64_t aorder[CCS_DSX_SHM_NAGREE]; /* when each value was put (anext then) */
    struct ccs_dsx_agree agree[CCS_DSX_SHM_NAGREE];
};

struct ccs_dsx_shm {
    struct header *h;
    struct slot *slots;
    size_t bytes;
    int32_t wsize, me;
    int leader, released;
    int fd; /* kept open: it holds this process's lock (header comment) */
    char path[256];
};

static size_t seg_bytes(int32_t wsize)
{
    return sizeof(struct header) + (size_t)wsize * sizeof(struct slot);
}

static struct {
    pthread_once_t once;
    uint64_t dev, ino;
} pidns = {.once = PTHREAD_ONCE_INIT};

static void pidns_read(void)
{
    struct stat sb;
    if (stat("/proc/self/ns/pid", &sb) == 0) {
        pidns.dev = (uint64_t)sb.st_dev;
        pidns.ino = (uint64_t)sb.st_ino;
    }
}

void ccs_dsx_pidns_self(uint64_t *dev, uint64_t *ino)
{
    pthread_once(&pidns.once, pidns_read);
    *dev = pidns.dev;
    *ino = pidns.ino;
}

int ccs_dsx_status_pid_alive(const struct ccs_dsx_status *st)
{
    uint64_t dev, ino;
    ccs_dsx_pidns_self(&dev, &ino);
    if (!ino || st->pidns_ino != ino || st->pidns_dev != dev || !st->pid)
        return -1;
    return kill((pid_t)st->pid, 0) == 0 || errno == EPERM;
}

/* The lock every attached process holds (header comment): shared, on the
 * segment's first byte. */
static int hold_lock(int fd)
{
    struct flock fl = {.l_type = F_RDLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 1};
    return fcntl(fd, F_OFD_SETLK, &fl);
}

/* 1 when no process holds the lock on the segment at FD. */
static int unlocked(int fd)
{
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 1};
    return fcntl(fd, F_OFD_GETLK, &fl) == 0 && fl.l_type == F_UNLCK;
}

/* 1 when the segment at FD holds no live process (left by a crashed job):
 * a rank published in it, and no process holds its lock. */
static int stale(int fd)
{
    struct stat sb;
    if (fstat(fd, &sb) != 0 || (size_t)sb.st_size < sizeof(struct header))
        return 0;
    void *m = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED)
        return 0;
    const struct header *h = m;
    int any = 0;
    if (atomic_load(&h->ready) == READY && h->wsize > 0 && seg_bytes(h->wsize) <= (size_t)sb.st_size) {
        const struct slot *sl = (const void *)(h + 1);
        for (int32_t r = 0; r < h->wsize && !any; r++)
            any = sl[r].st.magic == CCS_DSX_MAGIC;
    }
    munmap(m, (size_t)sb.st_size);
    return any && unlocked(fd);
}

/* Seconds a segment no process holds the lock of may stay unpublished (its
 * creator between O_EXCL and taking the lock, microseconds) before it counts
 * as abandoned. */
#define ABANDONED_S 10

/* Segments of this user that jobs left when they were killed, but for
 * MINE (ccs_dsx_shm_open handles its own name): removed.  A job's ranks
 * remove the name once all of them attached, where they know how many run
 * on the host identity; with CCSHIM_DESYNC_HOST they do not, and a killed
 * job left its 380 KB segment in /dev/shm for good.  A segment is this
 * user's, a regular file, and no process holds its lock (each attached
 * process holds it for as long as it lives), after a rank published in it
 * or ABANDONED_S after its creation; checked under flock and against the
 * name's inode, as check_existing does.  Returns how many were removed. */
static int reclaim_stale(const char *mine)
{
    char prefix[64];
    int n = 0;
    snprintf(prefix, sizeof prefix, "ccshim-dsx-%u-", (unsigned)geteuid());
    DIR *d = opendir("/dev/shm");
    if (!d)
        return 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char path[512];
        if (strncmp(e->d_name, prefix, strlen(prefix)) != 0)
            continue;
        snprintf(path, sizeof path, "/dev/shm/%s", e->d_name);
        if (strcmp(path, mine) == 0)
            continue;
        int fd = open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
        if (fd < 0)
            continue;
        struct stat sb, now;
        if (fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_uid == geteuid() &&
            flock(fd, LOCK_EX | LOCK_NB) == 0) {
            int abandoned = unlocked(fd) && sb.st_ctime + ABANDONED_S < time(NULL);
            if (stat(path, &now) == 0 && now.st_ino == sb.st_ino && (stale(fd) || abandoned) && unlink(path) == 0)
                n++;
            flock(fd, LOCK_UN);
        }
        close(fd);
    }
    closedir(d);
    return n;
}

/* An existing segment at FD (the name's inode SB) that is private to this
 * user: 0 to use it; 1 when it was a crashed job's and is removed (or the
 * name changed meanwhile): try again; -1 when not ours (WHY). */
static int check_existing(struct ccs_dsx_shm *s, int fd, char *why, size_t n)
{
    struct stat sb;
    if (fstat(fd, &sb) != 0 || sb.st_uid != geteuid() || (sb.st_mode & 077) != 0) {
        snprintf(why, n, "%s exists but is not private to this user (uid %u, mode %o); refusing it", s->path,
                 (unsigned)sb.st_uid, (unsigned)(sb.st_mode & 0777));
        return -1;
    }
    /* Replace a segment that a crashed job left, once, under a lock. */
    if (flock(fd, LOCK_EX) != 0)
        return 0;
    struct stat now;
    int same = stat(s->path, &now) == 0 && now.st_ino == sb.st_ino;
    if (same && stale(fd)) {
        unlink(s->path);
        flock(fd, LOCK_UN);
        return 1;
    }
    flock(fd, LOCK_UN);
    return same ? 0 : 1;
}

/* Creates the segment (sized, *CREATED 1) or opens the one there (*CREATED
 * 0), in up to 3 attempts: the descriptor, or -1 (WHY). */
static int create_or_open(struct ccs_dsx_shm *s, int *created, char *why, size_t n)
{
    for (int attempt = 0; attempt < 3; attempt++) {
        int fd = open(s->path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd >= 0) {
            *created = 1;
            if (ftruncate(fd, (off_t)s->bytes) != 0) {
                snprintf(why, n, "cannot size %s to %zu bytes: %s", s->path, s->bytes, strerror(errno));
                close(fd);
                unlink(s->path);
                return -1;
            }
            return fd;
        }
        if (errno != EEXIST) {
            snprintf(why, n, "cannot create %s: %s", s->path, strerror(errno));
            return -1;
        }
        fd = open(s->path, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
            continue; /* removed meanwhile: create it */
        int rc = check_existing(s, fd, why, n);
        if (rc == 0)
            return fd;
        close(fd);
        if (rc < 0)
            return -1;
    }
    snprintf(why, n, "cannot open %s after 3 attempts", s->path);
    return -1;
}

/* Maps the segment at FD (closed here) once its creator sized it, and
 * initialises its header (CREATED) or waits until its creator did and checks
 * that it is a segment of this job's size and this version.  0 or -1 (WHY). */
static int map_segment(struct ccs_dsx_shm *s, int fd, int created, char *why, size_t n)
{
    struct stat sb;
    for (int waited = 0; fstat(fd, &sb) == 0 && (size_t)sb.st_size < s->bytes && waited < 2000; waited += 5)
        ccs_sleep_ms(5);
    if ((size_t)sb.st_size != s->bytes) {
        snprintf(why, n, "%s has %lld bytes, expected %zu (another job with the same id and a different size?)",
                 s->path, (long long)sb.st_size, s->bytes);
        close(fd);
        return -1;
    }
    void *m = mmap(NULL, s->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) {
        snprintf(why, n, "cannot map %s: %s", s->path, strerror(errno));
        close(fd);
        return -1;
    }
    /* Held before this process publishes anything, for as long as it lives
     * (the descriptor stays open): the segment is not stale meanwhile. */
    if (hold_lock(fd) != 0) {
        snprintf(why, n, "cannot lock %s: %s", s->path, strerror(errno));
        munmap(m, s->bytes);
        close(fd);
        return -1;
    }
    s->fd = fd;
    s->h = m;
    s->slots = (struct slot *)(s->h + 1);
    if (created) {
        s->h->version = CCS_DSX_VERSION;
        s->h->wsize = s->wsize;
        s->h->slot_size = sizeof(struct slot);
        atomic_store(&s->h->ready, READY);
        return 0;
    }
    for (int waited = 0; atomic_load(&s->h->ready) != READY && waited < 2000; waited += 5)
        ccs_sleep_ms(5);
    if (atomic_load(&s->h->ready) != READY || s->h->wsize != s->wsize || s->h->version != CCS_DSX_VERSION ||
        s->h->slot_size != sizeof(struct slot)) {
        snprintf(why, n, "%s is not a ccshim %d-rank segment of this version", s->path, s->wsize);
        munmap(m, s->bytes);
        close(fd);
        return -1;
    }
    return 0;
}

void ccs_dsx_shm_path(const char *key, int32_t wsize, char *out, size_t n)
{
    uint64_t h = ccs_hash_bytes(key, strlen(key), (uint64_t)wsize);
    snprintf(out, n, "/dev/shm/ccshim-dsx-%u-%016llx", (unsigned)geteuid(), (unsigned long long)h);
}

int ccs_dsx_shm_taken(const char *key, int32_t wsize)
{
    char path[256];
    struct stat sb;
    ccs_dsx_shm_path(key, wsize, path, sizeof path);
    return lstat(path, &sb) == 0 && (sb.st_uid != geteuid() || (sb.st_mode & 077) != 0 || !S_ISREG(sb.st_mode));
}

struct ccs_dsx_shm *ccs_dsx_shm_open(const char *key, int32_t wsize, int32_t myrank, int local_size, char *why,
                                     size_t n)
{
    struct ccs_dsx_shm *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(why, n, "out of memory");
        return NULL;
    }
    ccs_dsx_shm_path(key, wsize, s->path, sizeof s->path);
    s->bytes = seg_bytes(wsize);
    s->wsize = wsize;
    s->me = myrank;
    int removed = reclaim_stale(s->path);
    if (removed > 0)
        ccs_log(CCS_LOG_INFO,
                "desync: removed %d shared-memory segment%s of this user's jobs that were killed (no process in "
                "them: /dev/shm/ccshim-dsx-%u-*)",
                removed, removed == 1 ? "" : "s", (unsigned)geteuid());
    int created = 0;
    int fd = create_or_open(s, &created, why, n);
    if (fd < 0 || map_segment(s, fd, created, why, n) != 0) {
        free(s);
        return NULL;
    }
    /* This rank's slot: free, or held by a process of ours that is gone
     * (as far as a pid tells: in another PID namespace it tells nothing). */
    struct slot *mine = &s->slots[myrank];
    uint64_t nsdev, nsino;
    ccs_dsx_pidns_self(&nsdev, &nsino);
    int self = mine->st.pid == (uint32_t)getpid() && mine->st.pidns_ino == nsino && mine->st.pidns_dev == nsdev;
    if (mine->st.magic == CCS_DSX_MAGIC && !self && mine->st.life == CCS_DSX_ALIVE &&
        ccs_dsx_status_pid_alive(&mine->st) == 1) {
        snprintf(why, n, "rank %d's slot in %s is held by live process %u (two jobs with one id?)", myrank, s->path,
                 mine->st.pid);
        munmap(s->h, s->bytes);
        close(s->fd);
        free(s);
        return NULL;
    }
    int32_t none = 0;
    s->leader = atomic_compare_exchange_strong(&s->h->leader, &none, myrank + 1) || none == myrank + 1;
    int32_t att = atomic_fetch_add(&s->h->attached, 1) + 1;
    atomic_fetch_add(&s->h->live, 1);
    if (local_size > 0 && att >= local_size)
        unlink(s->path); /* everyone is in: the name is no longer needed */
    return s;
}

void ccs_dsx_shm_publish(struct ccs_dsx_shm *s, const struct ccs_dsx_status *st)
{
    struct slot *sl = &s->slots[s->me];
    uint64_t g = atomic_load_explicit(&sl->gen, memory_order_relaxed);
    atomic_store_explicit(&sl->gen, g + 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    memcpy(&sl->st, st, sizeof *st);
    atomic_store_explicit(&sl->gen, g + 2, memory_order_release);
}

int ccs_dsx_shm_read(struct ccs_dsx_shm *s, int32_t r, struct ccs_dsx_status *out, uint64_t *gen, char *why,
                     size_t n)
{
    if (r < 0 || r >= s->wsize)
        return 0;
    struct slot *sl = &s->slots[r];
    for (int tries = 0; tries < 200; tries++) {
        uint64_t g1 = atomic_load_explicit(&sl->gen, memory_order_acquire);
        if (g1 == 0)
            return 0;
        if (g1 & 1) {
            sched_yield(); /* the owner is writing it: a few microseconds */
            continue;
        }
        if (gen && *gen == g1)
            return 2; /* unchanged since the caller's copy */
        /* Only the entries in use (checked again below, once copied). */
        uint32_t nc = sl->st.ncomm < CCS_DSX_MAXCOMM ? sl->st.ncomm : CCS_DSX_MAXCOMM;
        memcpy(out, &sl->st, offsetof(struct ccs_dsx_status, comm) + nc * sizeof(struct ccs_dsx_comm));
        out->ncomm = nc;
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&sl->gen, memory_order_relaxed) != g1)
            continue;
        if (ccs_dsx_check_status(out, s->wsize, why, n) != 0)
            return -1;
        if (out->wrank != r) {
            snprintf(why, n, "slot %d holds rank %d's status", r, out->wrank);
            return -1;
        }
        if (gen)
            *gen = g1;
        return 1;
    }
    return 0; /* kept changing: read it next period */
}

int ccs_dsx_shm_is_leader(struct ccs_dsx_shm *s)
{
    return s->leader;
}

int32_t ccs_dsx_shm_leader(struct ccs_dsx_shm *s)
{
    return atomic_load(&s->h->leader) - 1;
}

int ccs_dsx_shm_claim_leader(struct ccs_dsx_shm *s, int32_t from)
{
    int32_t cur = from + 1;
    if (atomic_load(&s->h->leader) == s->me + 1)
        return s->leader = 1;
    s->leader = atomic_compare_exchange_strong(&s->h->leader, &cur, s->me + 1);
    return s->leader;
}

void ccs_dsx_shm_resign(struct ccs_dsx_shm *s)
{
    int32_t me = s->me + 1;
    if (s->leader)
        atomic_compare_exchange_strong(&s->h->leader, &me, 0);
    s->leader = 0;
}
int32_t ccs_dsx_shm_attached(struct ccs_dsx_shm *s)
{
    return atomic_load(&s->h->attached);
}

int32_t ccs_dsx_shm_wsize(struct ccs_dsx_shm *s)
{
    return s->wsize;
}

/* Posted by the host's leader (the coordinator's verdicts), for a moment
 * at a handover by two (a leader that resigned while a verdict was in its
 * hands, and the next), and by any rank here whose own rules found a
 * MISMATCH (desync_verdict.c, on_verdict): a verdict's index is claimed by a
 * fetch-and-add on NVERDICT, and its
 * place's generation names the index, 2i+1 while verdict i is written
 * there and 2i+2 once it is.  So two writers never share a place, and a
 * reader takes place i only when it holds verdict i, whole. */
void ccs_dsx_shm_post_verdict(struct ccs_dsx_shm *s, const struct ccs_dsx_verdict *v)
{
    uint64_t i = atomic_fetch_add(&s->h->nverdict, 1);
    struct vslot *vs = &s->h->verdict[i % NVERDICT];
    atomic_store_explicit(&vs->gen, 2 * i + 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    memcpy(&vs->v, v, sizeof *v);
    atomic_store_explicit(&vs->gen, 2 * i + 2, memory_order_release);
}

int32_t ccs_dsx_shm_claim_verdict(struct ccs_dsx_shm *s, const struct ccs_dsx_verdict *v, int32_t proposed,
                                  int *won, unsigned *slot)
{
    return ccs_dsx_claim(&s->h->claims, ccs_dsx_claim_key(v), proposed, won, slot);
}

void ccs_dsx_shm_claim_seen(struct ccs_dsx_shm *s, unsigned slot)
{
    ccs_dsx_claim_seen(&s->h->claims, slot);
}

int ccs_dsx_shm_claim_was_seen(struct ccs_dsx_shm *s, unsigned slot)
{
    return ccs_dsx_claim_was_seen(&s->h->claims, slot);
}

int ccs_dsx_shm_next_verdict(struct ccs_dsx_shm *s, struct ccs_dsx_vcursor *c, struct ccs_dsx_verdict *out)
{
    uint64_t n = atomic_load(&s->h->nverdict);
    while (c->next < n) {
        if (n - c->next > NVERDICT) { /* lapped: the oldest are gone */
            c->next = n - NVERDICT;
            c->stalls = 0;
        }
        struct vslot *vs = &s->h->verdict[c->next % NVERDICT];
        uint64_t whole = 2 * c->next + 2;
        uint64_t g = atomic_load_explicit(&vs->gen, memory_order_acquire);
        if (g < whole) {
            /* Claimed, not yet written: its writer is in the middle, or died
             * there.  Looked at again in the next periods; after
             * CCS_DSX_VERDICT_STALLS of them, passed by for the next. */
            if (++c->stalls < CCS_DSX_VERDICT_STALLS)
                return 0;
        } else if (g == whole) {
            memcpy(out, &vs->v, sizeof *out);
            atomic_thread_fence(memory_order_acquire);
            if (atomic_load_explicit(&vs->gen, memory_order_relaxed) != g)
                continue; /* a later verdict took the place meanwhile: gone, seen as such next time round */
            char why[128];
            c->next++;
            c->stalls = 0;
            if (ccs_dsx_check_verdict(out, s->wsize, why, sizeof why) == 0)
                return 1;
            continue;
        }
        /* Passed by, or the place already holds a later verdict (gone). */
        c->next++;
        c->stalls = 0;
    }
    return 0;
}

void ccs_dsx_shm_agree_put(struct ccs_dsx_shm *s, const struct ccs_dsx_agree *a)
{
    struct slot *sl = &s->slots[s->me];
    uint64_t g = atomic_load_explicit(&sl->agen, memory_order_relaxed);
    atomic_store_explicit(&sl->agen, g + 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    /* A value for the same agreement (communicator and key) replaces the
     * old one; else an empty place, else the oldest.  So up to CCS_DSX_SHM_NAGREE
     * values put in a row (answers that do not wait, one per communicator
     * at a step marker) all stay for the others to read, and a rank that
     * went on to its next agreement leaves its last one for the slower
     * (who also find a completed one posted, ccs_dsx_shm_find_agreed). */
    int j = -1, empty = -1, oldest = 0;
    for (int i = 0; i < CCS_DSX_SHM_NAGREE; i++) {
        if (sl->agree[i].comm == a->comm && sl->agree[i].key == a->key) {
            j = i;
            break;
        }
        if (!sl->agree[i].comm && empty < 0)
            empty = i;
        if (sl->aorder[i] < sl->aorder[oldest])
            oldest = i;
    }
    if (j < 0)
        j = empty >= 0 ? empty : oldest;
    sl->agree[j] = *a;
    sl->aorder[j] = ++sl->anext;
    atomic_store_explicit(&sl->agen, g + 2, memory_order_release);
}

int ccs_dsx_shm_agree_get(struct ccs_dsx_shm *s, int32_t r, struct ccs_dsx_agree *out)
{
    if (r < 0 || r >= s->wsize)
        return 0;
    struct slot *sl = &s->slots[r];
    for (int tries = 0; tries < 50; tries++) {
        uint64_t g1 = atomic_load_explicit(&sl->agen, memory_order_acquire);
        if (g1 == 0)
            return 0;
        if (g1 & 1)
            continue;
        memcpy(out, sl->agree, sizeof sl->agree);
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&sl->agen, memory_order_relaxed) == g1)
            return CCS_DSX_SHM_NAGREE;
    }
    return 0;
}

void ccs_dsx_shm_post_agreed(struct ccs_dsx_shm *s, const struct ccs_dsx_agree *a)
{
    /* Several processes post at once (every rank of the host whose
     * agreement completed, and the leader with other hosts' results): a
     * place is claimed by a fetch-and-add on NAGREED and its generation by
     * a compare-and-swap from even to odd, so that two never write one
     * place.  A place whose generation is odd (its writer is in the middle,
     * or died there) is passed by for the next. */
    for (int tries = 0; tries < NAGREED; tries++) {
        uint64_t i = atomic_fetch_add(&s->h->nagreed, 1);
        struct aslot *as = &s->h->agreed[i % NAGREED];
        uint64_t g = atomic_load_explicit(&as->gen, memory_order_relaxed);
        if ((g & 1) || !atomic_compare_exchange_strong_explicit(&as->gen, &g, g + 1, memory_order_relaxed,
                                                                memory_order_relaxed))
            continue;
        atomic_thread_fence(memory_order_release);
        as->a = *a;
        atomic_store_explicit(&as->gen, g + 2, memory_order_release);
        return;
    }
}

int ccs_dsx_shm_find_agreed(struct ccs_dsx_shm *s, uint64_t comm, uint64_t key, struct ccs_dsx_agree *out)
{
    for (int i = 0; i < NAGREED; i++) {
        struct aslot *as = &s->h->agreed[i];
        uint64_t g1 = atomic_load_explicit(&as->gen, memory_order_acquire);
        if (g1 == 0 || (g1 & 1))
            continue;
        struct ccs_dsx_agree a = as->a;
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&as->gen, memory_order_relaxed) != g1)
            continue;
        if (a.comm == comm && a.key == key) {
            *out = a;
            return 1;
        }
    }
    return 0;
}

void ccs_dsx_shm_release(struct ccs_dsx_shm *s)
{
    if (!s || s->released)
        return;
    s->released = 1;
    if (atomic_fetch_sub(&s->h->live, 1) == 1)
        unlink(s->path); /* the last one out (ENOENT when already removed) */
}

void ccs_dsx_shm_close(struct ccs_dsx_shm *s)
{
    if (!s)
        return;
    ccs_dsx_shm_release(s);
    munmap(s->h, s->bytes);
    close(s->fd);
    free(s);
}

void ccs_dsx_shm_want(struct ccs_dsx_shm *s, uint64_t comm, uint64_t seq, uint64_t now_ms)
{
    struct header *h = s->h;
    for (int i = 0; i < NWANT; i++)
        if (atomic_load(&h->want_comm[i]) == comm && atomic_load(&h->want_seq[i]) == seq) {
            atomic_store(&h->want_until[i], now_ms + WANT_MS);
            return;
        }
    /* A probe replaces the last probe of COMM; a record want the oldest slot. */
    uint32_t i = NWANT;
    for (uint32_t k = 0; k < NWANT && (seq & CCS_DSX_PROBE_BIT); k++)
        if (atomic_load(&h->want_comm[k]) == comm && (atomic_load(&h->want_seq[k]) & CCS_DSX_PROBE_BIT))
            i = k;
    if (i == NWANT)
        i = atomic_fetch_add(&h->nwant, 1) % NWANT;
    atomic_store(&h->want_comm[i], 0); /* readers skip the slot while it changes */
    atomic_store(&h->want_seq[i], seq);
    atomic_store(&h->want_until[i], now_ms + ((seq & CCS_DSX_PROBE_BIT) ? PROBE_MS : WANT_MS));
    atomic_store(&h->want_comm[i], comm);
}

uint64_t ccs_dsx_shm_wanted(struct ccs_dsx_shm *s, uint64_t comm, int probe, uint64_t now_ms)
{
    struct header *h = s->h;
    uint64_t best = 0, newest = 0;
    for (int i = 0; i < NWANT; i++) {
        if (atomic_load(&h->want_comm[i]) != comm || atomic_load(&h->want_until[i]) < now_ms)
            continue;
        uint64_t q = atomic_load(&h->want_seq[i]), until = atomic_load(&h->want_until[i]);
        if (atomic_load(&h->want_comm[i]) != comm || !(q & CCS_DSX_PROBE_BIT) != !probe)
            continue;
        q &= ~CCS_DSX_PROBE_BIT;
        if (probe ? until > newest : (!best || q < best)) /* probes: the latest; records: the earliest */
            best = q, newest = until;
    }
    return best;
}

void ccs_dsx_shm_set_bye(struct ccs_dsx_shm *s)
{
    atomic_store(&s->h->bye, 1);
}

int ccs_dsx_shm_bye(struct ccs_dsx_shm *s)
{
    return atomic_load(&s->h->bye) != 0;
}

void ccs_dsx_shm_set_search(struct ccs_dsx_shm *s, uint64_t pass_ms, int settled)
{
    atomic_store(&s->h->search, pass_ms << 1 | (settled ? 1u : 0u));
}

int ccs_dsx_shm_search(struct ccs_dsx_shm *s, uint64_t *pass_ms)
{
    uint64_t w = atomic_load(&s->h->search);
    *pass_ms = w >> 1;
    return (int)(w & 1u);
}
