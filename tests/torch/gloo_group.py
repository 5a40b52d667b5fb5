"""The torch tests' jobs (tests/torch/*.py, tests/realstack/*.py) set up
torch.distributed's gloo process group the same way, from Open MPI's
environment: one process per rank under mpirun, rank 0 choosing a free port
and broadcasting it over MPI (a port fixed in advance collides with the
other engineers' and CI's jobs on the same host).

  comm, rank, world = gloo_group.init(timeout_s=0)

sets RANK, WORLD_SIZE, LOCAL_RANK and LOCAL_WORLD_SIZE from MPI, MASTER_ADDR
and MASTER_PORT where not set already, and calls
init_process_group("gloo") with TIMEOUT_S seconds (0: torch's default)."""
import os


def free_port(comm):
    """A free TCP port on 127.0.0.1, chosen by rank 0 of COMM, the same on every rank."""
    port = None
    if comm.Get_rank() == 0:
        import socket
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
    return comm.bcast(port, root=0)


def init(timeout_s=0):
    """MPI's COMM_WORLD and torch.distributed's gloo group over it: (comm, rank, world)."""
    from mpi4py import MPI
    import torch.distributed as dist
    comm = MPI.COMM_WORLD
    rank, world = comm.Get_rank(), comm.Get_size()
    os.environ["RANK"] = str(rank)
    os.environ["WORLD_SIZE"] = str(world)
    os.environ["LOCAL_RANK"] = os.environ.get("OMPI_COMM_WORLD_LOCAL_RANK", str(rank))
    os.environ["LOCAL_WORLD_SIZE"] = os.environ.get("OMPI_COMM_WORLD_LOCAL_SIZE", str(world))
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    if "MASTER_PORT" not in os.environ:
        os.environ["MASTER_PORT"] = str(free_port(comm))
    kw = {}
    if timeout_s:
        import datetime
        kw["timeout"] = datetime.timedelta(seconds=timeout_s)
    dist.init_process_group("gloo", rank=rank, world_size=world, **kw)
    return comm, rank, world
