/*
 * desync_start.c - the start-up of desync detection (docs/desync.md): how
 * this rank takes part, decided once, before the detector runs.
 *
 * Two ways in (desync.h): ccs_desync_start, where the launcher's
 * environment (torchrun, Open MPI, Slurm) says who shares the host and
 * where the coordinator listens (CCSHIM_COORD, else MASTER_ADDR at a port
 * keyed by the secret), and the job authenticates with a secret
 * (CCSHIM_SECRET or CCSHIM_SECRET_FILE); and ccs_desync_start_mpi, where
 * two collectives right after MPI_Init say who shares the host, rank 0
 * starts the coordinator on an address of its own interfaces and every
 * rank draws an X25519 key pair (only public halves cross MPI).  Either
 * way the result is a plan (desync_start.h) that desync_begin.c runs.
 *
 * Kept apart from the running detector because none of it runs again once
 * detection is on: it reads the environment and files, enumerates
 * interfaces and holds the credentials; desync.c holds what runs every
 * period.
 */
#include "desync_start.h"
#include "desync_state.h"
#include "ccs_config.h"
#include "desync.h"
#include "desync_auth.h"
#include "desync_tcp.h"
#include "log.h"
#include "comm.h"
#include "process.h"
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MIN_SECRET 32 /* characters: 128 random bits written in hex */

/* What start-up keeps: the credentials outlive it (a rank that comes to
 * lead its host later connects with them). */
static struct {
    char secret[80];    /* without MPI: the job's secret; under MPI: the job's random tag, in hex */
    char key_extra[32]; /* more of the segment's name, when the job has no id */
    /* How the side channel authenticates (desync_tcp.h): the secret, or
     * under MPI this rank's X25519 key pair and the coordinator's public
     * key (only public halves cross MPI), with the job's tag. */
    struct ccs_dsx_cred cred;
    unsigned char coord_pk[CCS_DSX_PKBYTES];
} st;

static void host_key(char *out, size_t n)
{
    if (ccs_cfg.desync_host && *ccs_cfg.desync_host)
        snprintf(out, n, "%s", ccs_cfg.desync_host);
    else
        snprintf(out, n, "%s", ccs_hostname());
}

/* An IPv4 address of this host other peers can reach, or loopback. */
static void my_address(char *out, size_t n, int loopback_ok)
{
    snprintf(out, n, "127.0.0.1");
    if (loopback_ok)
        return;
    struct ifaddrs *ifa = NULL;
    if (getifaddrs(&ifa) != 0)
        return;
    for (struct ifaddrs *i = ifa; i; i = i->ifa_next)
        if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET && (i->ifa_flags & IFF_UP) &&
            !(i->ifa_flags & IFF_LOOPBACK)) {
            inet_ntop(AF_INET, &((struct sockaddr_in *)(void *)i->ifa_addr)->sin_addr, out, (socklen_t)n);
            break;
        }
    freeifaddrs(ifa);
}

/* Parses CCSHIM_COORD ("host:port", port 0 allowed when ANY_PORT: the
 * coordinator picks one and MPI tells the others).  0, or -1 after one
 * warning naming the value (cut to a readable length) and what was
 * expected. */
static int parse_coord(const char *c, int any_port, char *host, size_t hn, int *port)
{
    if (ccs_config_parse_coord(c, any_port, host, hn, port) != 0) {
        static int logged;
        ccs_log_once(&logged, CCS_LOG_WARN,
                     "CCSHIM_COORD='%.200s%s' ignored: expected host:port with a port in %d..65535", c,
                     strlen(c) > 200 ? "...[truncated]" : "", any_port ? 0 : 1);
        return -1;
    }
    return 0;
}

/* CCSHIM_SECRET_FILE: the secret from PATH, a regular file of this user
 * that nobody else may read or write (mode 0600 or stricter), holding 16 to
 * 79 printable characters (a trailing newline is dropped).  0, or -1 with
 * WHY naming the file and what was expected. */
static int read_secret_file(const char *path, char *why, size_t n)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    struct stat sb;
    if (fd < 0) {
        snprintf(why, n, "CCSHIM_SECRET_FILE='%s' cannot be opened: %s", path, strerror(errno));
        return -1;
    }
    char buf[sizeof st.secret + 2];
    ssize_t got = -1;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode))
        snprintf(why, n, "CCSHIM_SECRET_FILE='%s' is not a regular file", path);
    else if (sb.st_uid != geteuid() || (sb.st_mode & 077))
        snprintf(why, n, "CCSHIM_SECRET_FILE='%s' must be yours and private (mode 0600), is uid %u mode %04o", path,
                 (unsigned)sb.st_uid, (unsigned)(sb.st_mode & 07777));
    else
        got = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (got < 0)
        return -1;
    while (got > 0 && (buf[got - 1] == '\n' || buf[got - 1] == '\r'))
        got--;
    buf[got] = 0;
    int printable = 1;
    for (ssize_t i = 0; i < got; i++)
        printable &= buf[i] > ' ' && buf[i] < 127;
    if (got < MIN_SECRET || got >= (ssize_t)sizeof st.secret || !printable) {
        snprintf(why, n,
                 "CCSHIM_SECRET_FILE='%s' holds %zd characters; expected %d to %zu printable ones (at least 128 "
                 "random bits: od -An -N16 -tx1 /dev/urandom | tr -d ' \\n')",
                 path, got, MIN_SECRET, sizeof st.secret - 1);
        return -1;
    }
    memcpy(st.secret, buf, (size_t)got + 1);
    return 0;
}

/* Shared by both start-ups, after the claim: the host's identity and the
 * segment's name, then desync_begin.c runs the plan.  COORD_HOST/PORT empty/<= 0
 * when no TCP. */
static int begin(int local_size, int spans_hosts, const char *coord_host, int coord_port)
{
    struct ccs_dsx_plan p = {.local_size = local_size,
                             .spans_hosts = spans_hosts,
                             .coord_host = coord_host,
                             .coord_port = coord_port,
                             .cred = &st.cred};
    host_key(p.hostkey, sizeof p.hostkey);
    snprintf(p.shm_key, sizeof p.shm_key, "%s|%s|%s|%s", ccs_job_id(), p.hostkey, st.secret, st.key_extra);
    return ccs_dsx_begin(&p);
}

/* The earliest-created agreed communicator with every rank of the world. */
struct first_comm {
    int32_t wsize;
    uint64_t id, t_created;
};

static void world_comm(struct ccs_comm *c, void *arg)
{
    struct first_comm *f = arg;
    if (!c->agreed || c->size != f->wsize)
        return;
    if (!f->id || c->t_created < f->t_created) {
        f->id = c->id;
        f->t_created = c->t_created;
    }
}

/* Without MPI, the coordinator's address into HOST (N bytes) and *PORT:
 * CCSHIM_COORD's, else MASTER_ADDR's at a port keyed by the secret; *PORT
 * -1 when there is none. */
static void env_coord_address(char *host, size_t n, int *port)
{
    *port = -1;
    const char *c = ccs_cfg.coord;
    if (c && *c) {
        if (parse_coord(c, 0, host, n, port) != 0)
            *port = -1;
    } else if (getenv("MASTER_ADDR") && *getenv("MASTER_ADDR")) {
        /* On MASTER_ADDR, at a port keyed by the secret (desync_auth.h):
         * MASTER_PORT + 1 was there for any local user to take first. */
        snprintf(host, n, "%s", getenv("MASTER_ADDR"));
        *port = CCS_DSX_PORT_KEYED;
    }
}

/* The job's tag (into the credentials) and the extra word of its shared
 * segment's name, for a job of WORLD_SIZE ranks started without MPI. */
static void env_job_tag(int32_t world_size)
{
    /* The identity of the job's first communicator spanning the world (from
     * the ncclUniqueId, the same on every rank and new per job) tells it
     * apart from others, in the segment's name and the job's tag, also
     * where nothing names the job (no launcher's id, or torchrun's default
     * "none") and where a launcher's id is there for anyone to read. */
    struct first_comm first = {.wsize = world_size};
    ccs_comm_foreach(world_comm, &first); /* also where a job id names the job: that id is predictable */
    if (first.id)
        snprintf(st.key_extra, sizeof st.key_extra, "comm%llx", (unsigned long long)first.id);
    char tagtext[400];
    snprintf(tagtext, sizeof tagtext, "job:%s|%d|%s", ccs_job_id(), world_size, st.key_extra);
    ccs_dsx_auth_jobtag(tagtext, st.cred.job);
}

/* The shared secret from CCSHIM_SECRET or CCSHIM_SECRET_FILE into
 * ST.secret (empty when neither holds one); FWHY (N bytes) says what was
 * wrong with one that was set. */
static void env_secret(char *fwhy, size_t n)
{
    size_t slen = ccs_cfg.secret ? strlen(ccs_cfg.secret) : 0;
    if (slen && slen < MIN_SECRET) {
        snprintf(fwhy, n,
                 "CCSHIM_SECRET holds %zu characters; at least %d expected (128 random bits: od -An -N16 -tx1 "
                 "/dev/urandom | tr -d ' \\n')",
                 slen, MIN_SECRET);
    } else if (slen) {
        snprintf(st.secret, sizeof st.secret, "%s", ccs_cfg.secret);
        if (slen >= sizeof st.secret)
            CCS_LOG(WARN, "CCSHIM_SECRET is longer than %zu characters; its first %zu are used",
                    sizeof st.secret - 1, sizeof st.secret - 1);
    } else if (ccs_cfg.secret_file && *ccs_cfg.secret_file) {
        (void)read_secret_file(ccs_cfg.secret_file, fwhy, n);
    }
}

/* The credentials from the secret; without one, ST.secret only names
 * this job's shared memory and TCP is refused (*TCP 0, *PORT -1), said
 * with FWHY when a secret was set but unusable. */
static void env_cred(const char *host, int *port, int *tcp, const char *fwhy)
{
    if (st.secret[0]) {
        st.cred.secret = st.secret; /* the key: the secret stretched, salted by the job's tag */
    } else {
        /* Names this job's shared memory only (mode 0600, this user's):
         * anyone can compute it, so it never authenticates TCP. */
        snprintf(st.secret, sizeof st.secret, "job:%s@%s:%d/%s", ccs_job_id(), host, *port, st.key_extra);
        if (*tcp) {
            if (*fwhy)
                CCS_LOG(WARN,
                        "desync: %s; TCP between hosts refused, detection across hosts is off (within each "
                        "host it stays on)",
                        fwhy);
            else
                CCS_LOG(WARN, "desync: ranks span hosts but neither CCSHIM_SECRET nor CCSHIM_SECRET_FILE is set; "
                              "unauthenticated TCP refused, detection across hosts is off (within each host it "
                              "stays on)");
            *tcp = 0;
            *port = -1;
        }
    }
}

int ccs_desync_start(void)
{
    int claim = ccs_dsx_claim_start();
    if (claim <= 0)
        return claim;
    int32_t world_size = ccs_world_size(), world_rank = ccs_world_rank();
    /* Not MPI: the launcher's environment (torchrun, Slurm) says the rest. */
    int local_size = ccs_env_int("LOCAL_WORLD_SIZE", 1);
    if (local_size < 0)
        local_size = ccs_env_int("OMPI_COMM_WORLD_LOCAL_SIZE", 1);
    /* Ranks span hosts when the launcher says fewer run here than in all. */
    int spans = local_size > 0 && local_size < world_size;
    if (ccs_cfg.desync_host && *ccs_cfg.desync_host)
        local_size = 0; /* ranks per host identity: unknown, for removing the segment */
    char host[256] = "";
    int port;
    env_coord_address(host, sizeof host, &port);
    int tcp = ccs_cfg.desync_transport == CCS_DESYNC_TCP || (ccs_cfg.desync_transport == CCS_DESYNC_AUTO && spans);
    char fwhy[400] = "";
    env_job_tag(world_size);
    env_secret(fwhy, sizeof fwhy);
    env_cred(host, &port, &tcp, fwhy);
    if (tcp && port <= 0) {
        ccs_dsx_say_off("ranks span hosts but no coordinator address (set CCSHIM_COORD=host:port, or MASTER_ADDR)");
        tcp = 0;
    }
    if (tcp && world_rank == 0) {
        char why[256];
        /* Listen on the announced address only (MASTER_ADDR or CCSHIM_COORD). */
        ccs_ds.per_host_hint = local_size;
        if (ccs_dsx_start_coordinator(host, port, world_size, &st.cred, why, sizeof why) < 0)
            ccs_dsx_retry_coordinator(host, port, world_size, &st.cred, why); /* says so, tries again */
    }
    return begin(local_size, spans, tcp ? host : NULL, tcp ? port : -1);
}

/* What crosses MPI at start-up: public values only (an eavesdropper on
 * the MPI traffic learns nothing to authenticate with). */
struct gather_item {
    char host[CCS_DSX_HOST];
    int32_t enabled;
    int32_t pad;
    unsigned char pk[CCS_DSX_PKBYTES]; /* the rank's X25519 public key */
};

struct bcast_item {
    uint32_t magic;
    int32_t port; /* coordinator port, or <= 0: no TCP */
    char host[64];
    unsigned char coord_pk[CCS_DSX_PKBYTES]; /* the coordinator's public key */
    unsigned char job[CCS_DSX_JOBTAG];       /* the job's tag, drawn by rank 0 */
};

/* The ranks' items ALL (W of them; MINE this rank's) counted: *LOCAL
 * sharing this rank's host, *HOSTS, and *ENABLED 0 unless every rank has
 * detection on; each public key copied into PKS (the coordinator's, W
 * keys) when not NULL. */
static void count_ranks(struct gather_item *all, int32_t w, const struct gather_item *mine, unsigned char *pks,
                        int *local_size, int *enabled, int *hosts)
{
    for (int32_t i = 0; i < w; i++) {
        if (pks)
            memcpy(pks + (size_t)i * CCS_DSX_PKBYTES, all[i].pk, CCS_DSX_PKBYTES);
        all[i].host[CCS_DSX_HOST - 1] = 0;
        *local_size += strcmp(all[i].host, mine->host) == 0;
        *enabled &= all[i].enabled != 0;
        int first = 1;
        for (int32_t j = 0; j < i && first; j++)
            first = strcmp(all[i].host, all[j].host) != 0;
        *hosts += first;
    }
}

/* A port of the ephemeral range (32768-60999, Linux's default), drawn at
 * random: where the coordinator could not listen on any port, the one it
 * keeps trying. */
static int random_port(void)
{
    unsigned char r[CCS_DSX_NONCE];
    ccs_dsx_auth_nonce(r);
    return 32768 + (int)(((unsigned)r[0] << 8 | r[1]) % (61000 - 32768));
}

/* Rank 0, detection on everywhere: the job's tag and, when the ranks talk
 * over TCP (*TCP), the coordinator, started on its announced address with
 * PKS (every rank's public key, W of them; HOSTS hosts), into BC for the
 * broadcast; *TCP 0 when it cannot have its keys.  Returns 1 when the
 * coordinator could not listen and is being tried again (it then keeps
 * PKS: the caller must not free them), else 0. */
static int coordinator_side(struct bcast_item *bc, unsigned char *pks, int32_t w, int hosts, int *tcp)
{
    int retrying = 0;
    bc->magic = CCS_DSX_MAGIC;
    unsigned char rnd[CCS_DSX_NONCE];
    ccs_dsx_auth_nonce(rnd); /* the job's tag: 128 random bits */
    memcpy(bc->job, rnd, sizeof bc->job);
    /* Kept for the job when the coordinator must be tried again (below). */
    static struct ccs_dsx_cred cc;
    cc = (struct ccs_dsx_cred){.secret = NULL, .peers = pks};
    memcpy(cc.job, bc->job, sizeof cc.job);
    if (ccs_dsx_auth_keypair(cc.pk, cc.sk) != 0 || !pks)
        *tcp = 0;
    memcpy(bc->coord_pk, cc.pk, sizeof bc->coord_pk);
    char chk[64];
    int chkport;
    if (ccs_cfg.coord && *ccs_cfg.coord) /* a malformed value is said once, used or not */
        (void)parse_coord(ccs_cfg.coord, 1, chk, sizeof chk, &chkport);
    if (*tcp) {
        char why[256];
        int port = 0;
        const char *c = ccs_cfg.coord;
        if (!(c && *c && parse_coord(c, 1, bc->host, sizeof bc->host, &port) == 0)) {
            port = 0;
            my_address(bc->host, sizeof bc->host, hosts <= 1); /* loopback when one host */
        }
        ccs_ds.per_host_hint = hosts > 0 ? (int)(w / hosts) : 0;
        /* Listen on the announced address only. */
        bc->port = ccs_dsx_start_coordinator(bc->host, port, w, &cc, why, sizeof why);
        if (bc->port < 0) {
            /* Never silently off: the address goes out all the same
             * (CCSHIM_COORD's port, or one drawn from the ephemeral range
             * where any port would do), the leaders keep connecting to it,
             * and this rank tries to listen there again every 2 s, saying
             * so (ccs_dsx_retry_coordinator).  A squatter there learns
             * nothing: the coordinator proves its key to every leader. */
            bc->port = port > 0 ? port : random_port();
            ccs_dsx_retry_coordinator(bc->host, bc->port, w, &cc, why);
            retrying = 1;
        }
    }
    if (!retrying) { /* (the coordinator holds its copies) */
        struct ccs_dsx_key wipe;
        memcpy(wipe.k, cc.sk, sizeof wipe.k);
        ccs_dsx_auth_wipe(&wipe);
        memset(cc.sk, 0, sizeof cc.sk);
    }
    return retrying;
}

int ccs_desync_start_mpi(const struct ccs_dsx_mpi_ops *ops)
{
    int32_t w = ccs_world_size(), r = ccs_world_rank();
    if (w <= 0 || r < 0)
        return -1;
    /* Both collectives run on every rank whatever is decided below. */
    struct gather_item mine;
    memset(&mine, 0, sizeof mine);
    host_key(mine.host, sizeof mine.host);
    mine.enabled = ccs_cfg.desync && atomic_load(&ccs_active) && ccs_dsx_auth_keypair(st.cred.pk, st.cred.sk) == 0;
    memcpy(mine.pk, st.cred.pk, sizeof mine.pk);
    struct gather_item *all = calloc((size_t)w, sizeof *all);
    static struct gather_item one; /* fallback so the collective still runs */
    int ok = all != NULL;
    if (ops->allgather(&mine, ok ? (void *)all : (void *)&one, ok ? (int)sizeof mine : 0, ops->arg) != 0)
        ok = 0;
    int local_size = 0, enabled = ok, hosts = 0;
    /* The coordinator (rank 0) keeps every rank's public key: any rank may
     * come to lead its host. */
    unsigned char *pks = r == 0 && ok ? malloc((size_t)w * CCS_DSX_PKBYTES) : NULL;
    if (ok)
        count_ranks(all, w, &mine, pks, &local_size, &enabled, &hosts);
    free(all);
    int tcp = enabled && (ccs_cfg.desync_transport == CCS_DESYNC_TCP ||
                          (ccs_cfg.desync_transport == CCS_DESYNC_AUTO && hosts > 1));
    struct bcast_item bc;
    memset(&bc, 0, sizeof bc);
    int retrying = r == 0 && enabled && coordinator_side(&bc, pks, w, hosts, &tcp);
    if (!retrying) /* (else the coordinator to come copies them) */
        free(pks);
    if (ops->bcast(&bc, sizeof bc, ops->arg) != 0 || bc.magic != CCS_DSX_MAGIC)
        return -1;
    if (!enabled)
        return -1;
    int claim = ccs_dsx_claim_start();
    if (claim <= 0)
        return claim;
    bc.host[sizeof bc.host - 1] = 0;
    /* This rank's side: its key pair, the coordinator's public key, the
     * job's tag (also, in hex, in the shared segment's name: random, so no
     * other user can predict it). */
    memcpy(st.coord_pk, bc.coord_pk, sizeof st.coord_pk);
    memcpy(st.cred.job, bc.job, sizeof st.cred.job);
    st.cred.secret = NULL;
    st.cred.peers = st.coord_pk;
    for (size_t i = 0; i < sizeof bc.job; i++)
        snprintf(st.secret + 2 * i, sizeof st.secret - 2 * i, "%02x", bc.job[i]);
    /* CCSHIM_COORD with a port, on a rank other than 0: the address this
     * rank reaches the coordinator at (behind NAT, or through a proxy). */
    const char *via = ccs_cfg.coord, *colon = via ? strrchr(via, ':') : NULL;
    if (r != 0 && tcp && bc.port > 0 && colon && atoi(colon + 1) > 0)
        (void)parse_coord(via, 0, bc.host, sizeof bc.host, &bc.port);
    return begin(local_size, hosts > 1, tcp && bc.port > 0 ? bc.host : NULL, tcp ? bc.port : -1);
}
