/* desync_nccl.h - called by the NCCL layer (nccl_comm.c) after every
 * communicator it registers: starts desync detection (once the world rank
 * is known) and registers ncclCommAbort for CCSHIM_ON_DESYNC=abort. */
#ifndef CCS_DESYNC_NCCL_H
#define CCS_DESYNC_NCCL_H

#include "attributes.h"

CCS_HIDDEN void ccs_desync_nccl_init(void);

#endif
