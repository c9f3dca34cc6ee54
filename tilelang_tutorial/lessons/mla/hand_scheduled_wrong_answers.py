"""Plausible wrong answers to notebook 04b's exercises (``tests/test_exercises.py`` checks that
each is rejected with its phrase; ``hand_scheduled_exercises.exercise_cases`` registers them).

The ring variants differ from the solution (``solutions/hand_scheduled_repair.py``) in one or two
places each, named in their docstrings; ``_ring`` writes them all so the difference is a flag.
"""
# NOTE: no `from __future__ import annotations` here: T.prim_func evaluates the annotations.


def _ring(n_blocks, block=128, *, parity_per_block=False, empty_count=256, right_arrives=True,
          producer_plus_one=True, left_waits=True):
    import tilelang  # noqa: F401
    import tilelang.language as T

    n, half, stages = n_blocks * block, block // 2, 2

    @T.prim_func
    def ring(X: T.Tensor((n,), "float32"), Y: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=384):
            buf = T.alloc_shared((stages, block), "float32")
            full = T.alloc_barrier([128] * stages)
            empty = T.alloc_barrier([empty_count] * stages)
            tx = T.get_thread_binding()
            if tx < 128:
                for k in T.serial(n_blocks):
                    if left_waits:
                        if parity_per_block:
                            T.barrier_wait(full[k % stages], k % 2)
                        else:
                            T.barrier_wait(full[k % stages], (k // stages) % 2)
                    for i in T.Parallel(half):
                        Y[k * block + i] = buf[k % stages, i] * 2
                    T.barrier_arrive(empty[k % stages])
            elif tx < 256:
                for k in T.serial(n_blocks):
                    if parity_per_block:
                        T.barrier_wait(full[k % stages], k % 2)
                    else:
                        T.barrier_wait(full[k % stages], (k // stages) % 2)
                    for i in T.Parallel(half):
                        Y[k * block + half + i] = buf[k % stages, half + i] * 2
                    if right_arrives:
                        T.barrier_arrive(empty[k % stages])
            else:
                for k in T.serial(n_blocks):
                    if parity_per_block:
                        T.barrier_wait(empty[k % stages], (k + 1) % 2)
                    elif producer_plus_one:
                        T.barrier_wait(empty[k % stages], (k // stages + 1) % 2)
                    else:
                        T.barrier_wait(empty[k % stages], (k // stages) % 2)
                    for i in T.Parallel(block):
                        buf[k % stages, i] = X[k * block + i]
                    T.barrier_arrive(full[k % stages])

    return ring


def ring_starter(n_blocks, block=128):
    """The notebook's starter: the hand-off's per-block parities and an ``empty`` that counts one
    warpgroup (deadlock: the consumers wait for a phase of ``full[1]`` that never comes)."""
    return _ring(n_blocks, block, parity_per_block=True, empty_count=128)


def ring_parity_per_block(n_blocks, block=128):
    """Counts right, parities ``k % 2`` / ``(k + 1) % 2`` as in the one-buffer hand-off."""
    return _ring(n_blocks, block, parity_per_block=True)


def ring_empty_counts_128(n_blocks, block=128):
    """Parities right, ``empty`` initialised for 128 arrivals though both consumers arrive."""
    return _ring(n_blocks, block, empty_count=128)


def ring_right_consumer_never_arrives(n_blocks, block=128):
    """The right consumer forgets ``T.barrier_arrive(empty[...])``."""
    return _ring(n_blocks, block, right_arrives=False)


def ring_producer_waits_first(n_blocks, block=128):
    """The producer waits for parity ``(k // 2) % 2`` of ``empty``: a release before its first fill."""
    return _ring(n_blocks, block, producer_plus_one=False)


def ring_left_consumer_does_not_wait(n_blocks, block=128):
    """The left consumer reads each stage without waiting on ``full`` (a race)."""
    return _ring(n_blocks, block, left_waits=False)


#: Q and one stage only (222,208 - 73,728)
SHARED_ONE_STAGE = {"seesaw_bytes": 148480, "own_p_buffers_fit": False}
#: the 64 x 576 tiles right, the running maxima and row-sum shares (2 x 2 x 64 fp32) left out
SHARED_NO_FP32_ARRAYS = {"seesaw_bytes": 222208 - 1024, "own_p_buffers_fit": False}
#: every tile counted at 4 bytes per element
SHARED_FP32 = {"seesaw_bytes": 2 * 222208, "own_p_buffers_fit": False}
#: P counted in a 64 x 64 buffer of its own, as in the ws kernel
SHARED_WITH_P = {"seesaw_bytes": 222208 + 8192, "own_p_buffers_fit": False}
#: the figure right, and the 16 KiB for two P tiles believed to fit
SHARED_P_FITS = {"seesaw_bytes": 222208, "own_p_buffers_fit": True}
