"""Suite ``gemm_host``: what ``gemm_relu`` costs per call above the compiled kernel(s) it runs,
at small M where a call is launch-bound, on the GPU.

For each point the op chooses its kernel (``rule.choose``: a tile, and a split of K with its
reduction); the bare call is that same compiled kernel (or split-K pair, with its workspace made
once) called directly on the same tensors. Both are timed back to back with host time counted
(:func:`tilelang_tutorial.host_cost.measure_record`, two methods that must agree) after their
poisoned outputs are checked against the fp32 reference. torch's ``relu(a @ b)`` is timed the
same way, for scale (a peer: the ``gemm_rule`` suite judges the op against torch).
"""
from __future__ import annotations

from ... import checks, host_cost, results

SUITE = "gemm_host"
COMMAND = "python -m tilelang_tutorial bench gemm_host"
POINTS = [(1, 4096, 4096), (64, 4096, 4096)]
DTYPE = "float16"


def measured(record):
    """What a ``gemm_host`` record measured: the program(s) of the chosen configuration (the
    split-K pair when it split K) and the op's Python code on the per-call path."""
    from . import op, programs_of, rule

    return programs_of(record) + [op.gemm_relu, op._plan, op._check, op.validate_inputs, rule.choose]


def bare_call(a, b, out, choice):
    """The compiled kernel(s) ``gemm_relu`` runs for ``choice``, called directly (the split-K
    workspace made here, once)."""
    import torch

    from . import op

    M, K = a.shape
    N = b.shape[1]
    if choice.gemv:
        from . import gemv

        compiled = gemv.build_gemv_relu(N, K, choice.gemv, DTYPE)
        return (lambda: compiled(a, b, out)), "compiled GEMV kernel(a, b, c)"
    kernels = op.build_for(N, K, choice.config, choice.split, DTYPE, choice.last_rows, choice.a_rows)
    if choice.split > 1:
        partial, reduce = kernels
        workspace = torch.empty((choice.split, M, N), dtype=torch.float32, device=a.device)

        def bare():
            partial(a, b, workspace)
            reduce(workspace, out)
        return bare, "compiled split-K pair: partial(a, b, workspace); reduce(workspace, c)"
    (compiled,) = kernels
    return (lambda: compiled(a, b, out)), "compiled kernel(a, b, c)"


def run(quick: bool = False) -> results.Run:
    import torch

    from . import kernel, op, rule

    prov = results.provenance(COMMAND + (" --quick" if quick else ""))
    op.clear_plans()                    # plans made before this run may hold other builds
    tdt = getattr(torch, DTYPE)
    out, notes = [], {}
    for M, N, K in POINTS:
        a = checks.random_tensor((M, K), tdt, "cuda")
        b = checks.random_tensor((K, N), tdt, "cuda")
        c, c_bare = checks.poisoned((M, N), tdt, "cuda"), checks.poisoned((M, N), tdt, "cuda")
        choice = rule.choose(M, N, K, DTYPE)
        bare, bare_name = bare_call(a, b, c_bare, choice)
        op.gemm_relu(a, b, out=c)
        bare()
        torch.cuda.synchronize()
        ref = kernel.gemm_relu_reference(a, b)
        tol = checks.TOLERANCE[DTYPE]
        op_check, bare_check = checks.compare(c, ref, tolerance=tol), checks.compare(c_bare, ref, tolerance=tol)
        c_torch = torch.empty((M, N), dtype=tdt, device=a.device)
        rec = host_cost.measure_record(
            suite=SUITE, kernel="gemm_relu",
            config=choice.as_dict(),
            shape={"M": M, "N": N, "K": K}, dtype=DTYPE, label=f"gemm_relu {M}x{N}x{K}",
            op=lambda: op.gemm_relu(a, b, out=c), bare=bare, op_check=op_check, bare_check=bare_check,
            call="gemm_relu(a, b, out=c) (config chosen by the rule)", bare_name=bare_name,
            eager=lambda: torch.relu_(torch.matmul(a, b, out=c_torch)),
            eager_name="torch: relu_(matmul(a, b, out=c))", eager_goal=False, notes=notes,
            flops=2.0 * M * N * K, nbytes=2.0 * (M * K + K * N + M * N))
        if rec:
            out.append(rec)
    return results.Run(out, prov, goals=host_cost.goals(), notes=notes)
