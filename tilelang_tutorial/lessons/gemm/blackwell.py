"""GEMM + ReLU for Blackwell datacenter GPUs (sm_100a: B200, GB200): the accumulator in tensor memory.

The Hopper program (:mod:`.kernel`) keeps the fp32 C tile in a register *fragment*. Compiled for
sm_100a it still builds, but TileLang 0.1.15 then lowers ``T.gemm`` to the old warp-level
``mma.sync`` (wgmma is Hopper-only): the fifth-generation tensor core is never used. TileLang
picks ``tcgen05.mma`` only when

* the target is sm_100..sm_110 (sm_100a, sm_103a, sm_110a; not the sm_120 consumer parts),
* A and B are in shared memory and C is a **tensor-memory** buffer (``T.alloc_tmem``), and
* an mbarrier is passed (``mbar=``): the MMA is issued by one thread, runs asynchronously and
  reports completion there; ``T.gemm`` waits on it itself (phase = the loop step's parity).

:data:`tmem_variant` is :func:`.kernel.gemm_relu_program` with those lines changed (the lines
marked ``# sm_100a``; ``last_rows.changes(tmem_variant)`` prints them), and
:func:`gemm_relu_tmem_program` builds it with the tile the tensor memory fixes. Compiled here on any machine (nvcc 13 knows sm_100a); no Blackwell GPU has run it for this
tutorial, so the lesson shows its generated code, not its numbers.
"""
# No `from __future__ import annotations`: T.prim_func evaluates the kernel's annotations.
from .kernel import gemm_relu_program
from .last_rows import variant_of

#: The TCGEN5MMA tile this program uses: M = 128 rows = the 128 TMEM lanes.
TMEM_LANES = 128

_IN_KERNEL, _IN_LOOP = " " * 12, " " * 16

#: notebook 02's kernel with its accumulator in tensor memory (knobs as :func:`gemm_relu_tmem_program` sets them)
tmem_variant = variant_of(
    gemm_relu_program, "tmem_variant", ("def gemm_relu_kernel(", "def gemm_relu_tmem_kernel("),
    ("return gemm_relu_kernel", "return gemm_relu_tmem_kernel"),
    ("C_local = T.alloc_fragment((block_M, block_N), accum_dtype)",
     "\n".join(["C_tmem = T.alloc_tmem([block_M, block_N], accum_dtype)          # sm_100a: tensor memory",
                _IN_KERNEL + "mma_done = T.alloc_barrier(1)                                     # sm_100a: MMA completion",
                _IN_KERNEL + "C_local = T.alloc_fragment((block_M, block_N), accum_dtype)      # epilogue registers",
                _IN_KERNEL + "C_shared = T.alloc_shared((block_M, block_N), in_dtype)"])),
    (_IN_KERNEL + "T.clear(C_local)\n", ""),
    ("T.gemm(A_shared, B_shared, C_local, policy=warp_policy)",
     "# sm_100a: no T.clear for TMEM -- the first step overwrites, later steps add.\n"
     + _IN_LOOP + "T.gemm(A_shared, B_shared, C_tmem, mbar=mma_done, clear_accum=ko == 0)"),
    ("for i, j in T.Parallel(block_M, block_N):",
     "T.copy(C_tmem, C_local)                                           # sm_100a: tcgen05.ld\n"
     + _IN_KERNEL + "for i, j in T.Parallel(block_M, block_N):"),
    ("\n".join(_IN_KERNEL + line for line in (
        "if store_via_shared:", "    C_shared = T.alloc_shared((block_M, block_N), in_dtype)", "    T.copy(C_local, C_shared)",
        "    T.copy(C_shared, C[by * block_M, bx * block_N])", "else:", "    T.copy(C_local, C[by * block_M, bx * block_N])")),
     "\n".join(_IN_KERNEL + line for line in ("T.copy(C_local, C_shared)", "T.copy(C_shared, C[by * block_M, bx * block_N])"))),
)


def gemm_relu_tmem_program(M, N, K, block_N=128, block_K=64, num_stages=4, in_dtype="float16",
                           accum_dtype="float32", dynamic_m=False, swizzle_panel=4, swizzle_order="column"):
    """``C = ReLU(A @ B)``, A (M, K), B (K, N), C (M, N) row-major, fp32 accumulator in TMEM.

    ``block_M`` is fixed at 128 and ``threads`` at 128 (one warpgroup reads the 128 TMEM lanes
    back); ``block_N`` is a multiple of 16 up to 256 (TMEM columns). Ragged M, N, K work: TMA
    loads zero-fill past the edges and the TMA store clips.
    """
    if not (16 <= block_N <= 256 and block_N % 16 == 0):
        raise ValueError(f"block_N must be a multiple of 16 in 16..256 (a TCGEN5MMA N), got {block_N}")
    if block_K % 16:
        raise ValueError(f"block_K must be a multiple of 16 (TCGEN5MMA K is 16 for 16-bit inputs), got {block_K}")
    if in_dtype not in ("float16", "bfloat16"):
        raise TypeError(f"in_dtype must be float16 or bfloat16, got {in_dtype!r}")
    if not isinstance(K, int) or K < 1:
        raise ValueError(f"K must be a positive int (the first MMA is what initialises TMEM), got {K!r}")
    return tmem_variant(M, N, K, block_M=TMEM_LANES, block_N=block_N, block_K=block_K, num_stages=num_stages,
                        threads=128, in_dtype=in_dtype, accum_dtype=accum_dtype, dynamic_m=dynamic_m,
                        swizzle_panel=swizzle_panel, swizzle_order=swizzle_order)


def build_gemm_relu_tmem(N: int, K: int, *, dtype: str = "float16", arch: str = "sm_100a", **knobs):
    """Compile the dynamic-M TMEM kernel for ``arch`` (sm_100a, sm_103a or sm_110a)."""
    from ... import runtime

    if not arch.startswith(("sm_100", "sm_103", "sm_110")) or not arch.endswith(("a", "f")):
        raise ValueError(f"the tensor-memory GEMM needs an sm_100a-class target (tcgen05), not {arch}")
    return runtime.compile_kernel(gemm_relu_tmem_program(None, N, K, in_dtype=dtype, dynamic_m=True, **knobs),
                                  arch=arch)
