/*
 * desync_device.c - NCCL completion on the device, for desync
 * (docs/desync.md, docs/nccl.md "Completion on the device"): the highest
 * seq of each NCCL communicator that the device completed, written by the
 * completion poller (ccs_desync_nccl_done) and read by the collector into
 * the rank's status; and, across the ranks of a view before the rules run,
 * what one member's device completed counted as completed on every
 * member's (ccs_dsx_device_align).
 */
#include "desync_device.h"
#include "desync_proto.h"
#include <stdatomic.h>
#include <stdint.h>

#define NCCL_SLOTS 64

/* Per communicator (claimed at its first report, never given back: at most
 * NCCL_SLOTS; one beyond is not tracked on the device): the poller writes,
 * the collector reads; both desync's thread but for a poller of its own. */
static struct {
    _Atomic uint64_t id;
    _Atomic uint64_t done;
} nccl[NCCL_SLOTS];

void ccs_dsx_collect_nccl_done(uint64_t comm, uint64_t seq_done)
{
    for (int i = 0; i < NCCL_SLOTS; i++) {
        uint64_t id = atomic_load_explicit(&nccl[i].id, memory_order_acquire);
        if (id == 0) {
            uint64_t zero = 0;
            if (!atomic_compare_exchange_strong(&nccl[i].id, &zero, comm) && zero != comm)
                continue;
            id = comm;
        }
        if (id == comm) {
            atomic_store_explicit(&nccl[i].done, seq_done, memory_order_relaxed);
            return;
        }
    }
}

int ccs_dsx_device_done(uint64_t comm, uint64_t *done)
{
    for (int i = 0; i < NCCL_SLOTS; i++) {
        if (atomic_load_explicit(&nccl[i].id, memory_order_acquire) != comm)
            continue;
        *done = atomic_load_explicit(&nccl[i].done, memory_order_relaxed);
        return 1;
    }
    return 0;
}

void ccs_dsx_device_align(const struct ccs_dsx_status **st, int32_t w)
{
    enum { NALIGN = 64 };
    struct {
        uint64_t id, known;
    } mx[NALIGN];
    int n = 0;
    for (int32_t r = 0; r < w; r++)
        for (uint32_t k = 0; st[r] && k < st[r]->ncomm && k < CCS_DSX_MAXCOMM; k++) {
            const struct ccs_dsx_comm *e = &st[r]->comm[k];
            if (!(e->flags & CCS_DSX_DEVICE) || e->state == CCS_DSX_FREED)
                continue;
            /* Completed on the device. */
            uint64_t known = e->issued - (e->dev_pending < e->issued ? e->dev_pending : e->issued);
            int i = 0;
            while (i < n && mx[i].id != e->id)
                i++;
            if (i == n) {
                if (n == NALIGN)
                    continue;
                mx[n].id = e->id;
                mx[n++].known = 0;
            }
            if (known > mx[i].known)
                mx[i].known = known;
        }
    for (int32_t r = 0; r < w && n; r++)
        for (uint32_t k = 0; st[r] && k < st[r]->ncomm && k < CCS_DSX_MAXCOMM; k++) {
            struct ccs_dsx_comm *e = (struct ccs_dsx_comm *)&st[r]->comm[k];
            if (!(e->flags & CCS_DSX_DEVICE))
                continue;
            int i = 0;
            while (i < n && mx[i].id != e->id)
                i++;
            if (i == n)
                continue;
            uint64_t known = mx[i].known < e->issued ? mx[i].known : e->issued;
            if (e->issued - e->dev_pending < known)
                e->dev_pending = (uint16_t)(e->issued - known);
            if (e->state == CCS_DSX_BLOCKED && known >= e->issued)
                e->state = CCS_DSX_IDLE; /* everything it enqueued completed somewhere: completes here too */
        }
}
