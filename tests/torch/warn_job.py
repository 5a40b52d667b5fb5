"""One rank on gloo builds a DistributedDataParallel model; the DDP
constructor raises a FutureWarning at its caller (stacklevel=2, as torch
2.x's broadcast_buffers warning does: simulated here on torch 1.13 through a
function the constructor calls).  tests/torch/ddp-warning.sh."""
import os
import warnings

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.parallel.distributed as ddp_mod


def main():
    real = ddp_mod._ddp_with_replicated_tensor_enabled

    def warning_at_the_constructors_caller():
        # frame 1: here; 2: DistributedDataParallel.__init__; 3: its caller
        warnings.warn("a torch FutureWarning raised in the DDP constructor", FutureWarning, stacklevel=3)
        return real()

    ddp_mod._ddp_with_replicated_tensor_enabled = warning_at_the_constructors_caller
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%s" % os.environ["PORT"], rank=0, world_size=1)
    warnings.simplefilter("default")
    model = nn.parallel.DistributedDataParallel(nn.Linear(4, 2))  # the caller's line
    del model
    dist.destroy_process_group()
    print("done", flush=True)


if __name__ == "__main__":
    main()
