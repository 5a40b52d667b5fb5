"""mpi4py_job.py - MPI calls from Python lines (tests/pysites/pysites-mpi4py.sh).

Three rounds of an Allreduce and a Barrier on COMM_WORLD, a bcast of an
object, an Allreduce on a Dup() of COMM_WORLD and one on a Split() of it;
each line that calls MPI is marked "# LINE:name" for the test.  Rank 0 prints
"sum S", "world_is_base B" (whether type(MPI.COMM_WORLD) is MPI.Intracomm)
and "world_equal E" (MPI.COMM_WORLD == the communicator kept at start).
"""
from mpi4py import MPI
import numpy as np

comm = MPI.COMM_WORLD
a = np.ones(4)
for i in range(3):
    comm.Allreduce(MPI.IN_PLACE, a, op=MPI.SUM)  # LINE:allreduce
    comm.Barrier()  # LINE:barrier
x = comm.bcast(5, root=0)  # LINE:bcast
dup = comm.Dup()  # LINE:dup
dup.Allreduce(MPI.IN_PLACE, a, op=MPI.SUM)  # LINE:dup_allreduce
part = comm.Split(0, comm.Get_rank())  # LINE:split
part.Allreduce(MPI.IN_PLACE, a, op=MPI.SUM)  # LINE:split_allreduce
dup.Free()
part.Free()
if comm.Get_rank() == 0:  # one rank writes, so that no two lines interleave
    print("sum %g\nworld_is_base %d\nworld_equal %d" % (a[0], type(MPI.COMM_WORLD) is MPI.Intracomm,
                                                       MPI.COMM_WORLD == comm))
