"""The kernels notebook 03's layout picker offers: builders ``(threads, policy, dtype, arch) ->
T.prim_func``, from this lesson's programs, notebook 01's copy-and-scale and notebook 02's GEMM.

:func:`catalogue` takes the notebook's own factories (so the picker draws the kernels the reader's
cells define); :data:`CATALOGUE` is the same built from the package's copies.
"""
from ...layouts import warp_policy
from . import programs


def _policy_name(policy):
    return policy if isinstance(policy, str) else ["Square", "FullRow", "FullCol"][int(policy.policy_type)]


def gemm_relu(threads, policy, dtype, arch):
    """notebook 02's kernel: a 1024^3 problem, 128x128x64 tiles, 3 stages."""
    from ..gemm.kernel import gemm_relu_program

    return gemm_relu_program(1024, 1024, 1024, block_M=128, block_N=128, block_K=64, num_stages=3,
                             threads=threads, policy=_policy_name(policy), in_dtype=dtype)


def catalogue(gemm_program=None, gemm_rs_program=None, chained_gemm_program=None, transpose_program=None,
              scale_copy_program=None) -> dict:
    """``{label: builder}``; each factory left out is the package's copy."""
    from ..tiles.scale_copy import scale_copy_program as package_scale_copy

    gemm_program = gemm_program or programs.gemm_program
    gemm_rs_program = gemm_rs_program or programs.gemm_rs_program
    chained_gemm_program = chained_gemm_program or programs.chained_gemm_program
    transpose_program = transpose_program or programs.transpose_program
    scale_copy_program = scale_copy_program or package_scale_copy
    return {
        "parallel (notebook 01's scale_copy)":
            lambda threads, policy, dtype, arch: scale_copy_program(64, block_M=64, block_N=64, threads=threads, dtype=dtype),
        "gemm accumulator":
            lambda threads, policy, dtype, arch: gemm_program(128, 128, 64, threads=threads,
                                                              policy=warp_policy(policy), dtype=dtype),
        "gemm, A in registers":
            lambda threads, policy, dtype, arch: gemm_rs_program(64, 64, 32, threads=threads,
                                                                 policy=warp_policy(policy), dtype=dtype),
        "two chained GEMMs (two warpgroups)":
            lambda threads, policy, dtype, arch: chained_gemm_program(threads=threads, policy=warp_policy(policy),
                                                                      dtype=dtype),
        "transpose (its policy is unused)":
            lambda threads, policy, dtype, arch: transpose_program(200, 136, threads=threads, dtype=dtype),
        "gemm_relu (notebook 02)": gemm_relu,
    }


CATALOGUE = catalogue()
