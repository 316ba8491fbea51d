"""burnish.cuda.distributed: data-parallel training across the GPUs of one machine through NCCL
(CuPy's bindings): one process per GPU, started by ``launch``, each with a ``Communicator``
whose collectives act on burnish tensors.

```
def train(comm, steps):                      # at module level: each rank imports it
    device = f"autodiff+cuda:{comm.device.index}"                 # this rank's GPU, with gradients
    model = comm.broadcast_module(MyConfig().init(device))         # rank 0's weights everywhere
    for batch in my_shard(comm.rank, comm.world_size):
        grads = loss(model, batch).backward()
        grads = comm.all_reduce_gradients(grads, model)            # the mean over the ranks
        model = optimizer.step(lr, model, grads)

if __name__ == "__main__":
    launch(train, args=(100,))               # world_size: every GPU
```
"""

from burnish.cuda.distributed.communicator import (
    Communicator,
    cuda_operand,
    load_nccl,
    reduction,
    unique_id,
)
from burnish.cuda.distributed.processes import (
    LaunchError,
    check_world_size,
    gpu_count,
    launch,
    run_ranks,
)

__all__ = [
    "Communicator",
    "LaunchError",
    "check_world_size",
    "cuda_operand",
    "gpu_count",
    "launch",
    "load_nccl",
    "reduction",
    "run_ranks",
    "unique_id",
]
