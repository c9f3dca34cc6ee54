"""Notebook 04b's exercises (the schedule written by hand).

1. **Repair a two-stage ring.** ``ring_program(n_blocks, block=128)`` returns a ``T.prim_func``
   ``ring(X, Y)`` (``X``, ``Y``: ``n_blocks * block`` float32) that computes ``Y = 2 X`` block by
   block the way the ``ws`` kernel moves KV pages: a producer warpgroup (threads 256-383) copies
   block ``k`` into stage ``k % 2`` of a shared ring of two stages and arrives on ``full[k % 2]``;
   two consumer warpgroups (threads 0-127 and 128-255) wait for it, each doubles one half of the
   block, and both arrive on ``empty[k % 2]`` so the producer may refill the stage. The starter
   in the notebook was grown from the one-buffer hand-off of section 2 and hangs.
   ``check_ring(ring_program)`` compiles it for sm_90a, runs it in the emulator on 5 blocks and
   on 8 (an odd number, and four full rounds of the ring), then -- only once the emulator found no
   deadlock -- on the GPU where there is one. A deadlock or a wrong block is explained from what
   was measured: which role waits on which barrier, in which phase, with how many arrivals, or
   which block holds whose data.

2. **Predict the seesaw CTA's shared memory, then read it.** Give ``{"seesaw_bytes": int,
   "own_p_buffers_fit": bool}``: the bytes of dynamic shared memory one seesaw attention CTA
   needs (add up the ``T.alloc_shared`` buffers of the seesaw cell), and whether it would still
   fit in a Hopper block (232,448 bytes) if ``P`` had two 64 x 64 16-bit buffers of its own
   instead of being written over the rotary keys. ``check_shared_memory(answer, kernel=...)``
   reads the figure from the compiled kernel's launch code (no GPU needed).

Solutions: ``solutions/hand_scheduled_repair.py``; wrong answers:
``hand_scheduled_wrong_answers.py``.
"""
from __future__ import annotations

import re
import warnings

from ...exercise_kit import ExerciseResult, call_factory, compile_or_fail, not_attempted, quiet_tilelang

BLOCK = 128
STAGES = 2
#: sizes the ring is run at: an odd number of blocks (the last round uses stage 0 only), and four
#: full rounds, so each stage's barriers complete phases 0 to 3: a parity that is right for the
#: first rounds only (a use count taken modulo anything but 2) gives a stale block
RING_SIZES = (5, 8)
#: which threads play which part in the ring (as in the ``ws`` kernel, the producer comes last)
ROLES = {0: "the left consumer (threads 0-127)", 128: "the right consumer (threads 128-255)",
         256: "the producer (threads 256-383)"}
#: a Hopper block's dynamic shared memory limit (runtime.ARCHS["sm_90a"].smem_per_block)
HOPPER_SMEM_PER_BLOCK = 232448
P_TILE_BYTES = 64 * 64 * 2

_WAIT = re.compile(r"\(threads (?P<t0>\d+)-(?P<t1>\d+)\) waits for mbarrier (?P<bar>\w+)(?:\[(?P<idx>\d+)\])? "
                   r"to complete a phase of parity (?P<parity>\d); the barrier is in phase (?P<phase>\d+) "
                   r"\(parity \d\), (?P<arrived>\d+) of (?P<count>\d+) arrivals")
_LOOP_K = re.compile(r"loop variables:.*?\bk(?:_\d+)? = (?P<k>\d+)")


# ------------------------------------------------------------------------------------------------
# Exercise 1: the ring
# ------------------------------------------------------------------------------------------------

def parse_deadlock(err) -> list[dict]:
    """The emulator's deadlock report as one dict per waiting role: ``role``, ``barrier``,
    ``stage``, ``parity`` (waited for), ``phase`` (the barrier's), ``arrived``, ``count``, ``k``
    (the loop iteration; None when the report names none). Lines it cannot read are left out."""
    waits = []
    for text in getattr(err, "waits", []) or []:
        m = _WAIT.search(text)
        if not m:
            continue
        k = _LOOP_K.search(text)
        waits.append({"role": ROLES.get(int(m["t0"]), f"threads {m['t0']}-{m['t1']}"),
                      "barrier": m["bar"], "stage": int(m["idx"] or 0), "parity": int(m["parity"]),
                      "phase": int(m["phase"]), "arrived": int(m["arrived"]), "count": int(m["count"]),
                      "k": int(k["k"]) if k else None})
    return waits


def deadlock_hints(waits: list[dict]) -> list[str]:
    """What the waits of a deadlocked ring say, one hint per anomaly found in them."""
    hints = []
    for w in waits:
        k, name = w["k"], f"{w['barrier']}[{w['stage']}]"
        if k is None:
            continue
        use = k // STAGES
        if w["barrier"] == "full":
            want, why = use % 2, ""
        elif w["barrier"] == "empty":
            want, why = (use + 1) % 2, (" (the producer's first wait on each stage must pass at once: "
                                         "parity 1 of a barrier that has completed no phase yet)")
        else:
            continue
        if w["parity"] != want:
            if w["barrier"] == "full":
                needs = f"needs phase {use} of {name} (the producer's fill of block {k})"
            elif use == 0:
                needs = "needs no release yet"
            else:
                needs = f"needs phase {use - 1} of {name} (the consumers' release of block {k - STAGES})"
            hints.append(f"{w['role']} waits at k = {k} for {name} with parity {w['parity']}: block {k} is use "
                         f"{use} of stage {w['stage']} (stage k % 2 serves every second block), so the wait "
                         f"{needs} and should ask for parity {want}{why}. A stage's barriers complete one phase "
                         f"per round of {STAGES} blocks, not one per block")
        if 0 < w["arrived"] < w["count"]:
            hints.append(f"{name} has only {w['arrived']} of its {w['count']} arrivals in phase {w['phase']}: "
                         f"{w['count'] // 128} warpgroup(s) of 128 threads must arrive on it and "
                         f"{w['arrived'] // 128} did. Does every role that uses the stage arrive on it?")
        completed_uses = use if w["barrier"] == "empty" else use + 1
        if w["phase"] > completed_uses:
            arrivers = "two consumer warpgroups: 256" if w["barrier"] == "empty" else "the producer warpgroup: 128"
            hints.append(f"{name} has completed {w['phase']} phase(s), but by k = {k} stage {w['stage']} has been "
                         f"used only {completed_uses} time(s): each phase completes after {w['count']} arrivals, "
                         f"and more threads than that arrive per use. A barrier's arrival count must be the "
                         f"threads of every role that arrives on it ({arrivers})")
    if not hints:
        hints.append("every role waits: for each wait above, find the arrival it needs and the role that "
                     "should make it, then check that role reaches it")
    return list(dict.fromkeys(hints))


def block_hints(out, x, n_blocks: int) -> list[str]:
    """Which blocks of the ring's output are wrong, and whose data they hold."""
    import torch

    hints = []
    want = (2 * x).view(n_blocks, BLOCK)
    got = out.view(n_blocks, BLOCK)
    unwritten = torch.isposinf(got)        # the output starts as +inf (NaN means: read from unwritten shared memory)
    half = BLOCK // 2
    for k in range(n_blocks):
        for side, cols in (("left", slice(0, half)), ("right", slice(half, BLOCK))):
            g, u = got[k, cols], unwritten[k, cols]
            if torch.equal(g, want[k, cols]):
                continue
            where = f"block {k}, {side} half (stage {k % STAGES})"
            if bool(u.all()):
                hints.append(f"{where} was never written: does the {side} consumer reach block {k}?")
            elif bool(torch.isnan(g).all()):
                hints.append(f"{where} was read before the producer had written the stage (shared memory "
                             f"starts as NaN in the emulator): the {side} consumer's wait on full[{k % STAGES}] "
                             f"let it through too early, or it does not wait")
            else:
                owner = next((j for j in range(n_blocks) if j != k and torch.equal(g, want[j, cols])), None)
                if owner is not None:
                    hints.append(f"{where} holds the data of block {owner}: the stage was read before the "
                                 f"producer refilled it, or refilled before it was read — which wait let a "
                                 f"role through too early?")
                else:
                    hints.append(f"{where} holds values that are not 2 X of any block: is it computed as "
                                 f"buf * 2 from the right stage and column?")
    return hints[:4]


def uninitialised_reads(caught) -> list[str]:
    """The first read of never-written shared memory the emulator warned about (emulators that
    report such reads do so with a warning whose class name says it), as a hint."""
    for w in caught or ():
        if "Uninitialised" in type(w.message).__name__ or "uninitialised read" in str(w.message):
            text = str(w.message).split(" -- ")[0].replace("uninitialised read: ", "")
            return [f"the emulator saw {text}: that consumer's wait did not wait for the producer's copy"]
    return []


def check_ring(factory, *, verbose: bool = True) -> ExerciseResult:
    """Check a reader's ``ring_program(n_blocks, block=128)``: compiled for sm_90a, run in the
    emulator on 5 and 8 blocks against ``2 X``, then on the GPU where there is one."""
    res = _check_ring(factory)
    if verbose:
        print(res)
    return res


def _check_ring(factory) -> ExerciseResult:
    import torch

    from ... import checks, emulate, runtime

    res = ExerciseResult()
    what = "repair ring_program(n_blocks, block=128) so that it computes Y = 2 X without hanging"
    programs = {}
    for n_blocks in RING_SIZES:
        program = call_factory(res, factory, (n_blocks,), what)
        if program is None:
            return res
        programs[n_blocks] = program
    kernel = compile_or_fail(res, programs[RING_SIZES[0]], "sm_90a")
    if kernel is None:
        return res
    for n_blocks, program in programs.items():
        x = checks.random_tensor((n_blocks * BLOCK,), torch.float32, "cpu", seed=n_blocks)
        # +inf, not NaN: the emulator's shared memory starts as NaN, so a NaN in Y is a stage read
        # before the producer wrote it, and an inf an element no consumer wrote
        y = torch.full((n_blocks * BLOCK,), float("inf"))
        seen: list = []
        try:
            with quiet_tilelang(), warnings.catch_warnings(record=True) as seen:
                warnings.simplefilter("always")
                emulate.run(program, x, y)
        except emulate.Deadlock as err:
            waits = parse_deadlock(err)
            lines = "; ".join(f"{w['role']} waits at k = {w['k']} for {w['barrier']}[{w['stage']}] parity "
                              f"{w['parity']} (phase {w['phase']}, {w['arrived']} of {w['count']} arrivals)"
                              for w in waits) or str(err).splitlines()[0]
            res.failed(f"{n_blocks} blocks, in the emulator: deadlock (on a GPU it would hang): {lines}")
            # what the consumers wrote before it stopped says which wait let them through too early
            written = [h for h in block_hints(y, x, n_blocks) if "never written" not in h]
            for h in written[:2] + uninitialised_reads(seen) + deadlock_hints(waits):
                res.hint(h)
            return res
        except emulate.EmulationError as err:
            return res.failed(f"{n_blocks} blocks: the emulator stopped: {str(err).splitlines()[0]}")
        cmp = checks.compare(y, 2 * x, tolerance=0)
        if not cmp.ok or torch.isinf(y).any():
            res.failed(f"{n_blocks} blocks, in the emulator: no deadlock, but wrong values: {cmp}, "
                       f"{int(torch.isinf(y).sum())} never written")
            for h in block_hints(y, x, n_blocks) + uninitialised_reads(seen):
                res.hint(h)
            return res
        res.passed(f"{n_blocks} blocks in the emulator (CPU): no deadlock, Y = 2 X exactly ({cmp})")
    res.numerics_checked, res.ran_on = True, "the emulator (CPU)"
    gpu = runtime.mode().can_run and not isinstance(kernel, runtime.UncompiledKernel)
    if gpu and runtime.current_arch() != "sm_90a":
        res.skipped(f"not run on this GPU ({runtime.current_arch()}): the ring was compiled for sm_90a, "
                    f"where the lesson's schedules run")
    elif gpu:
        n_blocks = RING_SIZES[0]
        x = checks.random_tensor((n_blocks * BLOCK,), torch.float32, "cuda", seed=1)
        y = checks.poisoned((n_blocks * BLOCK,), torch.float32, "cuda")
        runtime.run(kernel, x, y)
        torch.cuda.synchronize()
        cmp = checks.compare(y, 2 * x, tolerance=0)
        if not cmp.ok:
            res.failed(f"{n_blocks} blocks on the GPU: {cmp} (the emulator's fixed order hid a race: which read "
                       f"is not ordered by a barrier wait?)")
            return res
        res.passed(f"{n_blocks} blocks on the GPU: {cmp}")
        res.ran_on = "the emulator (CPU) and on the GPU"
    res.skipped("races: the emulator runs the roles in a fixed order, so a read that no barrier orders can "
                "still compute the right value here (and on one GPU run); running the compiled ring many times "
                "on a Hopper GPU is what would catch a timing-dependent one")
    return res


# ------------------------------------------------------------------------------------------------
# Exercise 2: the seesaw CTA's shared memory
# ------------------------------------------------------------------------------------------------

def measured_shared_bytes(kernel) -> int:
    """Dynamic shared memory of the attention kernel (the first kernel) of a compiled MLA program."""
    from ... import inspector

    return int(inspector.dynamic_shared_bytes(kernel)[0])


def _package_seesaw_kernel():
    # the package's copy: what the tests check against when no kernel is given
    from . import op

    return op.build_mla_decode(128, "float16", split=True, schedule="seesaw", arch="sm_90a")


def _size_hint(predicted: int, measured: int) -> str:
    diff = predicted - measured
    tile, stage = 64 * 576 * 2, 64 * 576 * 2
    if measured and abs(predicted - 2 * measured) <= 2048:
        return "about twice the measured figure: the tiles are 16-bit (2 bytes per element), not fp32"
    if measured and abs(2 * predicted - measured) <= 2048:
        return "about half the measured figure: count bytes (2 per 16-bit element), not elements"
    if abs(diff + tile) <= 1024:
        return (f"one 64 x 576 16-bit tile ({tile:,} bytes) short: the CTA holds Q and one KV page per stage, "
                f"and there are {STAGES} stages")
    if abs(diff - stage) <= 1024:
        return f"one 64 x 576 tile ({stage:,} bytes) too many: count Q once and one page per stage"
    if diff in (-1024, -512):
        return ("close: the running maxima and the row-sum shares are shared memory too (M_shared and l_shared, "
                "2 x 64 fp32 arrays each)")
    if abs(diff - P_TILE_BYTES) <= 1024 or abs(diff - 2 * P_TILE_BYTES) <= 1024:
        return "the seesaw gives P no buffer of its own: it is written over the page's rotary keys (K_pe_s)"
    return (f"off by {diff:+,} bytes ({diff / 1024:+.1f} KiB): list each T.alloc_shared of the seesaw cell with "
            f"its shape and element size")


def check_shared_memory(answer, *, kernel=None, verbose: bool = True) -> ExerciseResult:
    """Check ``{"seesaw_bytes": int, "own_p_buffers_fit": bool}`` against the shared memory the
    compiled seesaw kernel asks for (``kernel``: the reader's build; default the package's)."""
    res = _check_shared_memory(answer, kernel)
    if verbose:
        print(res)
    return res


def _check_shared_memory(answer, kernel) -> ExerciseResult:
    res = ExerciseResult(cpu_only=True)
    what = 'give {"seesaw_bytes": <bytes of shared memory of one seesaw CTA>, "own_p_buffers_fit": True or False}'
    if answer is None:
        return not_attempted(res, what)
    if not isinstance(answer, dict) or set(answer) != {"seesaw_bytes", "own_p_buffers_fit"}:
        return res.failed(f"expected a dict with keys seesaw_bytes, own_p_buffers_fit; got {answer!r}")
    predicted, fits = answer["seesaw_bytes"], answer["own_p_buffers_fit"]
    if predicted is None or fits is None:
        return not_attempted(res, what)
    if isinstance(predicted, bool) or not isinstance(predicted, int) or predicted <= 0:
        return res.failed(f"seesaw_bytes must be a positive whole number of bytes, got {predicted!r}")
    if not isinstance(fits, bool):
        return res.failed(f"own_p_buffers_fit must be True or False, got {fits!r}")
    try:
        with quiet_tilelang():
            measured = measured_shared_bytes(kernel if kernel is not None else _package_seesaw_kernel())
    except Exception as exc:  # no nvcc, or a kernel that did not compile
        res.skipped(f"NOT CHECKED: the compiled kernel's shared memory could not be read ({type(exc).__name__}: "
                    f"{str(exc).splitlines()[0][:200]}); it needs the kernel compiled for sm_90a")
        return res.failed("nothing was measured to compare with")
    if predicted != measured:
        res.failed(f"seesaw_bytes: you predicted {predicted:,} bytes; the compiled kernel asks for {measured:,} "
                   f"(read from its launch code)")
        res.hint(_size_hint(predicted, measured))
        return res
    res.passed(f"seesaw_bytes: {predicted:,} is exactly the {measured:,} bytes the compiled kernel asks for "
               f"(read from its launch code)")
    with_p = measured + 2 * P_TILE_BYTES
    really_fits = with_p <= HOPPER_SMEM_PER_BLOCK
    if fits != really_fits:
        return res.failed(f"own_p_buffers_fit: {measured:,} + 2 x {P_TILE_BYTES:,} bytes for two 64 x 64 16-bit "
                          f"P tiles = {with_p:,} bytes, {'within' if really_fits else 'over'} the "
                          f"{HOPPER_SMEM_PER_BLOCK:,} bytes (227 KiB) a Hopper block can have")
    res.passed(f"own_p_buffers_fit = {fits}: {measured:,} + {2 * P_TILE_BYTES:,} = {with_p:,} bytes against the "
               f"{HOPPER_SMEM_PER_BLOCK:,} bytes of a Hopper block (arithmetic on the measured figure)")
    res.skipped("not built here: the variant with its own P buffers (it needs changes to the seesaw cell); "
                "compiling that variant and launching it on a Hopper GPU would confirm the limit")
    return res


# ------------------------------------------------------------------------------------------------
# Registration (lessons/mla/__init__.py adds these to its own lists)
# ------------------------------------------------------------------------------------------------

def exercise_cases():
    from .. import Exercise, WrongAnswer
    from . import hand_scheduled_wrong_answers as wrong
    from .solutions import hand_scheduled_repair as solution

    return [
        Exercise("04b ring repair", check_ring, solution.ring_program, starter=None, wrong_answers=(
            WrongAnswer("the starter as given", wrong.ring_starter, "should ask for parity 1"),
            WrongAnswer("parities copied from the one-buffer hand-off", wrong.ring_parity_per_block,
                        "one phase per round"),
            WrongAnswer("empty counts one warpgroup", wrong.ring_empty_counts_128, "arrival count must be"),
            WrongAnswer("the right consumer never releases a stage", wrong.ring_right_consumer_never_arrives,
                        "only 128 of its 256 arrivals"),
            WrongAnswer("the producer waits for a release before its first fill", wrong.ring_producer_waits_first,
                        "must pass at once"),
            WrongAnswer("the left consumer does not wait", wrong.ring_left_consumer_does_not_wait,
                        "read before the producer had written"),
        )),
        Exercise("04b shared memory", check_shared_memory, solution.SHARED_MEMORY, starter=None, wrong_answers=(
                WrongAnswer("one stage", wrong.SHARED_ONE_STAGE, "one 64 x 576 16-bit tile"),
                WrongAnswer("fp32 tiles", wrong.SHARED_FP32, "2 bytes per element"),
                WrongAnswer("the fp32 arrays left out", wrong.SHARED_NO_FP32_ARRAYS, "2 x 64 fp32 arrays"),
                WrongAnswer("P in its own buffer (the ws layout)", wrong.SHARED_WITH_P, "written over"),
                WrongAnswer("own P buffers fit", wrong.SHARED_P_FITS, "over the 232,448 bytes"),
            )),
    ]


def flow_bugs():
    from .. import FlowBug

    notebook = "04b_mla_hand_scheduled.ipynb"
    return [
        FlowBug(notebook, "hand_scheduled_parts", "l_i[i] = l_i[i] * alpha[i] + row_sum[i]",
                "l_i[i] = l_i[i] + row_sum[i]", what="softmax denominator not rescaled", until="## 5."),
        FlowBug(notebook, "mla_decode_seesaw_program", "T.barrier_wait(empty_l[t], 1 - jp % 2)",
                "T.barrier_wait(empty_l[t], jp % 2)", what="producer waits for a release before its first load",
                until="## 5."),
    ]
