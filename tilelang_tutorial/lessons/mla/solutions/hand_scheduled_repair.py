"""Reference answers for notebook 04b's exercises (try them yourself first).

1. The two-stage ring, repaired: stage ``k % 2`` holds block ``k``, so each barrier of a stage
   completes one phase per *round* of two blocks and the ``k``-th block is use ``k // 2`` of its
   stage: the consumers wait for parity ``(k // 2) % 2`` of ``full``, the producer for parity
   ``(k // 2 + 1) % 2`` of ``empty`` (its first wait on each stage passes at once); and ``empty``
   counts the arrivals of both consumer warpgroups, 256 threads.
2. The seesaw CTA's shared memory: Q (64 x 576) and two stages of one 64 x 576 KV page, all
   16-bit, plus the running maxima and the row-sum shares (2 x 64 fp32 each): 222,208 bytes.
   Two more 64 x 64 16-bit tiles for P would make 238,592 bytes, over the 232,448 bytes (227 KiB)
   a Hopper block can have: hence P written over the rotary keys.
"""
# NOTE: no `from __future__ import annotations` here: T.prim_func evaluates the annotations.


def ring_program(n_blocks, block=128):
    """Y = 2 X, block by block through a two-stage ring: a producer warpgroup (threads 256-383)
    fills stage k % 2 with block k; two consumer warpgroups each double one half of it."""
    import tilelang  # noqa: F401
    import tilelang.language as T

    n, half, stages = n_blocks * block, block // 2, 2

    @T.prim_func
    def ring(X: T.Tensor((n,), "float32"), Y: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=384):
            buf = T.alloc_shared((stages, block), "float32")
            full = T.alloc_barrier([128] * stages)    # the producer's 128 threads arrive
            empty = T.alloc_barrier([256] * stages)   # both consumer warpgroups arrive
            tx = T.get_thread_binding()
            if tx < 128:                              # left consumer: Y[:half] of each block
                for k in T.serial(n_blocks):
                    T.barrier_wait(full[k % stages], (k // stages) % 2)
                    for i in T.Parallel(half):
                        Y[k * block + i] = buf[k % stages, i] * 2
                    T.barrier_arrive(empty[k % stages])
            elif tx < 256:                            # right consumer: Y[half:] of each block
                for k in T.serial(n_blocks):
                    T.barrier_wait(full[k % stages], (k // stages) % 2)
                    for i in T.Parallel(half):
                        Y[k * block + half + i] = buf[k % stages, half + i] * 2
                    T.barrier_arrive(empty[k % stages])
            else:                                     # producer
                for k in T.serial(n_blocks):
                    T.barrier_wait(empty[k % stages], (k // stages + 1) % 2)
                    for i in T.Parallel(block):
                        buf[k % stages, i] = X[k * block + i]
                    T.barrier_arrive(full[k % stages])

    return ring


SHARED_MEMORY = {"seesaw_bytes": 222208, "own_p_buffers_fit": False}
