"""burnish.jit: the kernel IR, its code generators, the memory pool and the autotune cache that
the GPU backends share."""
