"""arrayjit-distributed: collectives of node values across processes and hosts over MPI
(mpi4py), ordered through arrayjit's stream model.

>>> from arrayjit_distributed import Communicator
>>> comm = Communicator(backend, routine.context)   # MPI.COMM_WORLD by default
>>> comm.all_reduce(grad, "mean")                   # in place on the device, queued on the stream
"""

from arrayjit_distributed.__about__ import __version__
from arrayjit_distributed.communicator import Communicator
from arrayjit_distributed.mpi_types import REDUCE_OPS

__all__ = ["REDUCE_OPS", "Communicator", "__version__"]
