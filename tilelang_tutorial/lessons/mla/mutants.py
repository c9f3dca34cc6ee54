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
}
