"""Plausible wrong answers to notebook 04b's exercises (``tests/test_exercises.py`` checks that
each is rejected with its phrase; ``hand_scheduled_exercises.exercise_cases`` registers them).

Each ring is the solution (``solutions/hand_scheduled_repair.py``) with one or two mistakes in it.
"""
from ...exercise_kit import mutated
from .solutions.hand_scheduled_repair import SHARED_MEMORY, ring_program

_I = " " * 20      # the indentation of a role's loop body
#: the consumers' waits on ``full``, with the line after each (what tells the two apart)
_LEFT_WAIT = f"T.barrier_wait(full[k % stages], (k // stages) % 2)\n{_I}for i in T.Parallel(half):\n{_I}    Y[k * block + i]"
_RIGHT_WAIT = (f"T.barrier_wait(full[k % stages], (k // stages) % 2)\n{_I}for i in T.Parallel(half):\n"
               f"{_I}    Y[k * block + half + i]")
_PER_BLOCK_PARITIES = ((_LEFT_WAIT, _LEFT_WAIT.replace("(k // stages) % 2", "k % 2")),
                       (_RIGHT_WAIT, _RIGHT_WAIT.replace("(k // stages) % 2", "k % 2")),
                       ("(k // stages + 1) % 2", "(k + 1) % 2"))
_EMPTY_COUNTS_128 = ("T.alloc_barrier([256] * stages)", "T.alloc_barrier([128] * stages)")

#: The notebook's starter: the hand-off's per-block parities and an ``empty`` that counts one
#: warpgroup (deadlock: the consumers wait for a phase of ``full[1]`` that never comes).
ring_starter = mutated(ring_program, *_PER_BLOCK_PARITIES, _EMPTY_COUNTS_128)
#: Counts right, parities ``k % 2`` / ``(k + 1) % 2`` as in the one-buffer hand-off.
ring_parity_per_block = mutated(ring_program, *_PER_BLOCK_PARITIES)
#: Parities right, ``empty`` initialised for 128 arrivals though both consumers arrive.
ring_empty_counts_128 = mutated(ring_program, _EMPTY_COUNTS_128)
#: The right consumer forgets ``T.barrier_arrive(empty[...])``.
ring_right_consumer_never_arrives = mutated(
    ring_program, (f"half + i] * 2\n{_I}T.barrier_arrive(empty[k % stages])", "half + i] * 2"))
#: The producer waits for parity ``(k // 2) % 2`` of ``empty``: a release before its first fill.
ring_producer_waits_first = mutated(ring_program, ("(k // stages + 1) % 2", "(k // stages) % 2"))
#: The left consumer reads each stage without waiting on ``full`` (a race).
ring_left_consumer_does_not_wait = mutated(ring_program, (_LEFT_WAIT, _LEFT_WAIT.split("\n", 1)[1].lstrip()))

_BYTES = SHARED_MEMORY["seesaw_bytes"]
#: Q and one stage only (one 64 x 576 16-bit stage short)
SHARED_ONE_STAGE = {"seesaw_bytes": _BYTES - 64 * 576 * 2, "own_p_buffers_fit": False}
#: the 64 x 576 tiles right, the running maxima and row-sum shares (2 x 2 x 64 fp32) left out
SHARED_NO_FP32_ARRAYS = {"seesaw_bytes": _BYTES - 1024, "own_p_buffers_fit": False}
#: every tile counted at 4 bytes per element
SHARED_FP32 = {"seesaw_bytes": 2 * _BYTES, "own_p_buffers_fit": False}
#: P counted in a 64 x 64 buffer of its own, as in the ws kernel
SHARED_WITH_P = {"seesaw_bytes": _BYTES + 64 * 64 * 2, "own_p_buffers_fit": False}
#: the figure right, and the 16 KiB for two P tiles believed to fit
SHARED_P_FITS = {"seesaw_bytes": _BYTES, "own_p_buffers_fit": True}
