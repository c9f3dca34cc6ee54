"""Lesson 04's mutation targets (``python -m tilelang_tutorial mutants mla``): the exercise
solutions written as factories (04's combine kernel, 04b's ring repair), each through its checker.

``EQUIVALENT`` lists the mutants reviewed as giving the same results on every input, each with
its reason (:mod:`tilelang_tutorial.mutants`)."""
from ...mutants import exercise_target


def targets():
    from . import exercise_cases

    return [exercise_target(ex) for ex in exercise_cases() if callable(ex.solution)]


#: ``{target: mutant id: reason}``: reviewed mutants that give the same results on every input.
EQUIVALENT = {
    "04b ring repair: mask L16: tx < 128 -> tx <= 128":
        "thread 128 joins the left consumer, idle above 64 threads; the right consumer's T.Parallel is "
        "re-based on its first thread, so every element is written once and `empty` still gets 256 "
        "arrivals a phase (read in the generated CUDA)",
    "04b ring repair: constant L16: 128 -> 129": "the same mutant as `tx < 128 -> tx <= 128` (above)",
}
