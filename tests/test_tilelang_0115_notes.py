"""The TileLang 0.1.15 behaviours the tutorial works around, one minimal reproducer each.

Every test asserts the 0.1.15 behaviour. When a test fails, TileLang has changed: its message
says what changed and which workaround (file) can go or which text must be updated. The notes
themselves, with the explanations, are in ``docs/tilelang-0.1.15-notes.md`` (one section per
test, same numbering).

Most reproducers only *lower* the program (TileLang passes plus CUDA code generation, no nvcc):
``_lower_source``. The few that need nvcc or ptxas are skipped where there is none. Compiles that
succeed are cached in ``TILELANG_CACHE_DIR``; the three that fail in nvcc/ptxas (items 1b, 3) are
small kernels, a few seconds each.
"""
from __future__ import annotations

import re
import warnings

import pytest
import tilelang
import tilelang.language as T
from tilelang.layout import Fragment

from tilelang_tutorial import runtime
from tilelang_tutorial.exercise_kit import quiet_tilelang

NOTES = "docs/tilelang-0.1.15-notes.md"
needs_nvcc = pytest.mark.skipif(runtime.nvcc_path() is None, reason="needs nvcc")


def gone(item: str, where: str) -> str:
    """The failure message of a test whose 0.1.15 behaviour is no longer there."""
    return (f"this TileLang no longer has this bug ({item}): remove the workaround in {where} "
            f"and the section in {NOTES}")


def changed(item: str, err: BaseException) -> str:
    """A build still fails, but not the way it did in 0.1.15."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    return f"{item}: the build fails differently than in TileLang 0.1.15, re-check {NOTES}: {lines[-3:]}"


def build_error(build):
    """Run ``build()`` with TileLang's logging quiet; the exception it raised, or None."""
    try:
        with quiet_tilelang():
            build()
    except Exception as err:  # noqa: BLE001 - TileLang raises RuntimeError, TypeError, ValueError
        return err
    return None


def _lower_source(program, arch: str, pass_configs: dict | None = None) -> str:
    """The CUDA source TileLang generates for ``arch``, without running nvcc."""
    import tvm
    from tvm.target import Target

    target = Target({"kind": "cuda", "arch": arch})
    with quiet_tilelang(), tvm.transform.PassContext(opt_level=3, config=pass_configs or {}), target:
        return tilelang.lower(program, target=target).kernel_source


def _compile(program, arch: str, pass_configs: dict | None = None):
    with quiet_tilelang():
        return tilelang.compile(program, target={"kind": "cuda", "arch": arch}, pass_configs=pass_configs)


# ------------------------------------------------------------------------------------------------
# 1a. Batched reduce with two cross-thread steps and a 2-lane packed reducer
# ------------------------------------------------------------------------------------------------

def batched_row_max(dtype: str = "float16", batch: int = 2):
    @T.prim_func
    def row_max(X: T.Tensor((32, 64), dtype), Out: T.Tensor((32,), dtype)):
        with T.Kernel(1, threads=128):
            s = T.alloc_fragment((32, 64), dtype)
            m = T.alloc_fragment((32,), dtype)
            # a row's 64 columns cross threads in two factors: 4 lanes (stride 1), 4 warps (stride 32)
            T.annotate_layout({s: Fragment([32, 64],
                                           forward_thread_fn=lambda i, j: j % 4 + 4 * (i % 8) + 32 * (j // 16),
                                           forward_index_fn=lambda i, j: 4 * (i // 8) + (j // 4) % 4)})
            T.copy(X, s)
            T.reduce_max(s, m, dim=1, batch=batch)
            T.copy(m, Out)

    return row_max


@pytest.mark.parametrize("arch,dtype", [("sm_80", "float16"), ("sm_100a", "float32")])
def test_1a_batched_reduce_leaves_its_pack_buffer_unallocated(arch, dtype):
    err = build_error(lambda: _lower_source(batched_row_max(dtype, batch=2), arch))
    assert err is not None, gone("batched T.reduce_max with two cross-thread steps",
                                 "tilelang_tutorial/lessons/mla/auto.py (T.reduce_max without batch=)")
    assert "(m_pack,) are used, but are not passed in as API arguments" in str(err), changed("1a", err)
    # the workaround: batch=1 builds
    src = _lower_source(batched_row_max(dtype, batch=1), arch)
    assert "AllReduce<tl::MaxOp, 4, 1" in src and "run_batch" not in src


def test_1a_fp32_on_hopper_is_not_packed_and_builds():
    src = _lower_source(batched_row_max("float32", batch=2), "sm_90a")
    assert "run_batch" in src, "fp32 batch=2 on sm_90a no longer uses the batched all-reduce"


# ------------------------------------------------------------------------------------------------
# 1b. Plain sm_90 / sm_100 / sm_120: warp specialization injects setmaxnreg
# ------------------------------------------------------------------------------------------------

def pipelined_tile_sum():
    @T.prim_func
    def tile_sum(A: T.Tensor((1024, 64), "float16"), Out: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128):
            a_s = T.alloc_shared((64, 64), "float16")
            acc = T.alloc_fragment((64, 64), "float32")
            T.clear(acc)
            for k in T.Pipelined(16, num_stages=2):
                T.copy(A[k * 64, 0], a_s)
                for i, j in T.Parallel(64, 64):
                    acc[i, j] += a_s[i, j]
            T.copy(acc, Out)

    return tile_sum


def test_1b_plain_sm120_gets_setmaxnreg_lowering():
    src = _lower_source(pipelined_tile_sum(), "sm_120")
    assert "warpgroup_reg_alloc" in src and "tma_load" in src, gone(
        "setmaxnreg injected for a plain sm_120 target", "tilelang_tutorial/runtime.py (ARCHS['sm_120'].pass_configs)")


@needs_nvcc
def test_1b_plain_sm120_fails_in_nvcc_and_the_pass_config_fixes_it():
    err = build_error(lambda: _compile(pipelined_tile_sum(), "sm_120"))
    assert err is not None, gone("setmaxnreg on plain sm_120", "tilelang_tutorial/runtime.py (ARCHS['sm_120'].pass_configs)")
    assert "warpgroup_reg_alloc requires a target with CTA register reconfiguration" in str(err), changed("1b", err)
    # the tutorial's sm_120 entry carries {"tl.disable_warp_specialized": True}: a cp.async pipeline
    src = runtime.compile_kernel(pipelined_tile_sum(), arch="sm_120").get_kernel_source()
    assert "cp_async" in src and "warpgroup_reg" not in src and "tma_load" not in src


def small_gemm_program(pipelined: bool = False):
    @T.prim_func
    def gemm_frag(A: T.Tensor((128, 256), "float16"), B: T.Tensor((256, 128), "float16"),
                  C: T.Tensor((128, 128), "float32")):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((128, 64), "float16")
            B_s = T.alloc_shared((64, 128), "float16")
            C_f = T.alloc_fragment((128, 128), "float32")          # accumulator in registers
            T.clear(C_f)
            for k in T.Pipelined(4, num_stages=2 if pipelined else 1):
                T.copy(A[0, k * 64], A_s)
                T.copy(B[k * 64, 0], B_s)
                T.gemm(A_s, B_s, C_f)
            T.copy(C_f, C)

    return gemm_frag


def test_1b_plain_sm90_without_warp_specialization_still_selects_wgmma():
    """wgmma needs sm_90a; the plain-sm_90 build of these templates is a trap (brkpt) in the PTX."""
    src = _lower_source(small_gemm_program(pipelined=True), "sm_90", {"tl.disable_warp_specialized": True})
    assert "wgmma" in src, gone("wgmma selected for plain sm_90", "tilelang_tutorial/runtime.py (validate_arch's sm_90 hint)")
    with pytest.raises(runtime.ArchError, match="sm_90a"):
        runtime.validate_arch("sm_90")


# ------------------------------------------------------------------------------------------------
# 1c. T.gemm on sm_100a with a fragment accumulator is mma.sync, not tcgen05
# ------------------------------------------------------------------------------------------------

def test_1c_sm100a_fragment_accumulator_lowers_to_mma_sync():
    src = _lower_source(small_gemm_program(), "sm_100a")
    assert "tcgen05" not in src and "mma_sync" in src, gone(
        "T.gemm with a fragment accumulator on sm_100a uses mma.sync",
        "tilelang_tutorial/lessons/gemm/blackwell.py (the TMEM program exists for this)")
    from tilelang_tutorial.lessons.gemm.blackwell import gemm_relu_tmem_program

    tmem = _lower_source(gemm_relu_tmem_program(256, 256, 256, num_stages=2), "sm_100a")
    assert "tcgen05mma_ss" in tmem and "mma_sync" not in tmem


# ------------------------------------------------------------------------------------------------
# 1d. sm_120: a kernel over the 99 KiB per-block limit compiles
# ------------------------------------------------------------------------------------------------

def big_tile_program():
    @T.prim_func
    def big_tile(A: T.Tensor((384, 256), "float16"), B: T.Tensor((384, 256), "float16")):
        with T.Kernel(1, threads=128):
            s = T.alloc_shared((384, 256), "float16")       # 196608 B = 192 KiB
            T.copy(A, s)
            T.copy(s, B)

    return big_tile


@needs_nvcc
def test_1d_sm120a_compiles_a_kernel_that_cannot_launch():
    from tilelang_tutorial.inspector import dynamic_shared_bytes

    try:
        kernel = _compile(big_tile_program(), "sm_120a")
    except Exception as err:  # noqa: BLE001
        raise AssertionError(gone("no shared-memory check at compile time",
                                  "tilelang_tutorial/runtime.py (ARCHS smem_per_block), lessons/gemm/rule.py "
                                  "(fits) and lessons/mla/op.py (stages_for)") + f"; it now says: {str(err).splitlines()[-1:]}") from err
    assert [int(b) for b in dynamic_shared_bytes(kernel)] == [196608]
    assert 196608 > runtime.ARCHS["sm_120a"].smem_per_block == 101376


# ------------------------------------------------------------------------------------------------
# 2. cp.async pipeline, >= 2 stages, dynamic trip count: Downcast from tirx.Sub to ir.IntImm
# ------------------------------------------------------------------------------------------------

def two_tile_pipeline(num_stages: int):
    n = T.dynamic("n")

    @T.prim_func
    def two_tiles(A: T.Tensor((n, 64), "float16"), B: T.Tensor((n, 64), "float16"),
                  Out: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128):
            a_s = T.alloc_shared((64, 64), "float16")
            b_s = T.alloc_shared((64, 64), "float16")
            acc = T.alloc_fragment((64, 64), "float32")
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(n, 64), num_stages=num_stages):
                T.copy(A[k * 64, 0], a_s)
                T.copy(B[k * 64, 0], b_s)
                for i, j in T.Parallel(64, 64):
                    acc[i, j] += a_s[i, j]
                for i, j in T.Parallel(64, 64):
                    acc[i, j] *= b_s[i, j]
            T.copy(acc, Out)

    return two_tiles


def test_2_cp_async_pipeline_with_dynamic_trip_count():
    err = build_error(lambda: _lower_source(two_tile_pipeline(2), "sm_80"))
    assert err is not None, gone("2-stage cp.async pipeline over a dynamic trip count",
                                 "tilelang_tutorial/lessons/mla/op.py (ARCH_STAGES['sm_80'] = 1)")
    assert "Downcast from tirx.Sub to ir.IntImm failed" in str(err), changed("2", err)
    assert "cp_async_wait<" in _lower_source(two_tile_pipeline(1), "sm_80")   # the workaround: one stage


# ------------------------------------------------------------------------------------------------
# 3. sm_90a GEMM with exactly one operand TMA-eligible, two consumer warpgroups: ptxas registers
# ------------------------------------------------------------------------------------------------

def ragged_gemm(N: int, K: int, block_N: int = 256, threads: int = 256):
    m = T.dynamic("m")

    @T.prim_func
    def gemm_ragged(A: T.Tensor((m, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((m, N), "float16")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(m, 128), threads=threads) as (bx, by):
            A_s = T.alloc_shared((128, 64), "float16")
            B_s = T.alloc_shared((64, block_N), "float16")
            C_f = T.alloc_fragment((128, block_N), "float32")
            T.clear(C_f)
            for k in T.Pipelined(T.ceildiv(K, 64), num_stages=4):
                T.copy(A[by * 128, k * 64], A_s)
                T.copy(B[k * 64, bx * block_N], B_s)
                T.gemm(A_s, B_s, C_f, policy=T.GemmWarpPolicy.FullRow)
            T.copy(C_f, C[by * 128, bx * block_N])

    return gemm_ragged


def test_3_one_tma_operand_doubles_the_producer_lowering():
    # K = 999: A's rows are 1998 B apart (not 16-byte aligned), so A cannot be a TMA tensor; B can
    src = _lower_source(ragged_gemm(1000, 999), "sm_90a")
    assert "__launch_bounds__(512, 1)" in src and "warpgroup_reg" not in src, gone(
        "256-thread plain-load producer + 256 consumers = 512 threads, 128 registers each",
        "tilelang_tutorial/lessons/gemm/rule.py (choose: seed config for N % 8 or K % 8) and op.py "
        "(check_config_for_shape)")
    assert "tma_load(B_desc" in src and "tma_load(A_desc" not in src
    aligned = _lower_source(ragged_gemm(1000, 1000), "sm_90a")      # both TMA: 128 producer threads
    assert "__launch_bounds__(384, 1)" in aligned and "warpgroup_reg_alloc<240>" in aligned


@needs_nvcc
def test_3_one_tma_operand_runs_out_of_registers_in_ptxas():
    err = build_error(lambda: _compile(ragged_gemm(1000, 999), "sm_90a"))
    assert err is not None, gone("ptxas 'Insufficient registers' for a 128x256 tile with K % 8 != 0",
                                 "tilelang_tutorial/lessons/gemm/rule.py (choose) and op.py "
                                 "(check_config_for_shape)")
    assert "Insufficient registers (128)" in str(err), changed("3", err)


# ------------------------------------------------------------------------------------------------
# 4. API spellings
# ------------------------------------------------------------------------------------------------

def test_4_use_swizzle_rejects_col():
    with pytest.raises(ValueError, match="Unsupported swizzle order: col"):
        T.use_swizzle(4, order="col")
    assert T.use_swizzle(4, order="column", enable=False) is None
    from tilelang_tutorial.lessons.gemm.configs import SWIZZLE_ORDERS

    assert SWIZZLE_ORDERS == ("row", "column")


def test_4_there_is_no_T_layout():
    import tilelang.layout

    assert not hasattr(T, "layout"), gone("tilelang.language has no 'layout'", "notebooks/02b_gemm_in_depth.ipynb (section 1, the spellings 0.1.15 rejects)")
    assert callable(tilelang.layout.make_swizzled_layout)


def test_4_T_symbolic_is_a_deprecated_alias_of_T_dynamic():
    assert hasattr(T, "symbolic"), "T.symbolic was removed: update notebooks/01_tile_mental_model.ipynb (section 9, the Triton table) and " + NOTES
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        n = T.symbolic("n")
    assert [w.category for w in caught] == [DeprecationWarning], "T.symbolic no longer warns"
    assert "use T.dynamic(...) instead" in str(caught[0].message)
    assert type(n) is type(T.dynamic("n"))


# ------------------------------------------------------------------------------------------------
# 5. A fragment element read outside T.Parallel replicates the whole fragment in every thread
# ------------------------------------------------------------------------------------------------

def scalar_read_program(read_outside: bool):
    @T.prim_func
    def scalar_read(A: T.Tensor((64, 64), "float32"), Out: T.Tensor((64, 64), "float32"),
                    S: T.Tensor((1,), "float32")):
        with T.Kernel(1, threads=128):
            f = T.alloc_fragment((64, 64), "float32")
            T.copy(A, f)
            for i, j in T.Parallel(64, 64):
                f[i, j] = f[i, j] * 2
            if read_outside:
                S[0] = f[0, 0]                      # one element, read outside T.Parallel
            T.copy(f, Out)

    return scalar_read


def test_5_scalar_fragment_read_replicates_the_fragment():
    src = _lower_source(scalar_read_program(True), "sm_90a")
    assert "float f[4096];" in src, gone("a scalar fragment read makes every thread hold the whole fragment",
                                         "the tutorial's kernels (they read fragments only inside T.Parallel)")
    assert "if (((int)threadIdx.x) == 0)" in src            # ... and one thread does the copy out
    assert "float f[32];" in _lower_source(scalar_read_program(False), "sm_90a")


# ------------------------------------------------------------------------------------------------
# 7. A register fragment as a GEMM operand across warpgroups: no exchange is inserted
# ------------------------------------------------------------------------------------------------

def test_7_fragment_operand_across_warpgroups_is_a_layout_conflict():
    from tilelang_tutorial import layouts
    from tilelang_tutorial.lessons.layouts import programs

    err = build_error(lambda: layouts.infer_layouts(programs.chained_gemm_fragment_program(), arch="sm_90a"))
    assert err is not None, gone("no register->shared exchange for a fragment GEMM operand",
                                 "tilelang_tutorial/lessons/mla/auto.py (T.copy(acc_s, S_shared)) and notebooks/03_layouts.ipynb "
                                 "(section 4: chained_gemm_program's H_shared)")
    assert "Layout infer conflict between acc_h and H_frag" in str(err), changed("7", err)
    assert "H_shared" in layouts.infer_layouts(programs.chained_gemm_program(), arch="sm_90a")


# ------------------------------------------------------------------------------------------------
# 8. A tile wider than the 256-element TMA box is split into several boxes (a feature)
# ------------------------------------------------------------------------------------------------

def test_8_wide_tile_copy_is_split_into_tma_boxes():
    from tilelang.cuda.language import copy as cuda_copy

    m = T.dynamic("m")

    @T.prim_func
    def stage_rows(X: T.Tensor((m, 512), "float16"), Y: T.Tensor((m, 512), "float16")):
        with T.Kernel(T.ceildiv(m, 8), threads=128) as bx:
            tile = T.alloc_shared((8, 512), "float16")
            cuda_copy(X[bx * 8, 0], tile, prefer_instruction="tma")
            T.copy(tile, Y[bx * 8, 0])

    src = _lower_source(stage_rows, "sm_90a")
    boxes = re.findall(r"for \(int i = 0; i < (\d+); \+\+i\) \{\s*tl::tma_load\(X_desc[^;]*\(i \* (\d+)\)", src)
    assert boxes == [("8", "64")], (
        f"TileLang no longer splits an (8, 512) tile into 8 TMA boxes of 8 x 64 (found {boxes}): update "
        f"notebooks/05b_rmsnorm_in_depth.ipynb (section 2, 'Does the TMA box limit force small chunks?'), "
        f"lessons/rmsnorm/two_pass.py and {NOTES}")
    assert "arrive_and_expect_tx(8192)" in src


# ------------------------------------------------------------------------------------------------
# 9a. Two T.Pipelined loops staging into one shared buffer (Hopper, warp-specialized)
# ------------------------------------------------------------------------------------------------

def two_loops_program(same_buffer: bool):
    @T.prim_func
    def two_loops(X: T.Tensor((64, 512), "float16"), Y: T.Tensor((64, 512), "float16")):
        with T.Kernel(4, threads=128) as bx:
            a = T.alloc_shared((16, 128), "float16")
            b = a if same_buffer else T.alloc_shared((16, 128), "float16")
            acc = T.alloc_fragment((16, 128), "float32")
            T.clear(acc)
            for k in T.Pipelined(4, num_stages=2):
                T.copy(X[bx * 16, k * 128], a)
                for i, j in T.Parallel(16, 128):
                    acc[i, j] += a[i, j]
            for k in T.Pipelined(4, num_stages=2):
                T.copy(X[bx * 16, k * 128], b)
                for i, j in T.Parallel(16, 128):
                    Y[bx * 16 + i, k * 128 + j] = b[i, j] * acc[i, j]

    return two_loops


def test_9a_two_pipelined_loops_cannot_share_a_shared_buffer():
    err = build_error(lambda: _lower_source(two_loops_program(True), "sm_90a"))
    assert err is not None, gone("two T.Pipelined loops sharing one shared buffer",
                                 "tilelang_tutorial/lessons/rmsnorm/two_pass.py (x_chunk / x_again)")
    assert "shape = (2, 2, 16, 128)" in str(err), changed("9a", err)
    assert "tma_load" in _lower_source(two_loops_program(False), "sm_90a")


# ------------------------------------------------------------------------------------------------
# 9b. Two synchronous TCGEN5MMA GEMMs on one mbarrier wait with the same parity
# ------------------------------------------------------------------------------------------------

def test_9b_two_tmem_gemms_on_one_barrier_wait_on_the_same_parity():
    @T.prim_func
    def two_mma(A: T.Tensor((128, 64), "float16"), B: T.Tensor((64, 128), "float16"), C: T.Tensor((128, 128), "float32")):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((128, 64), "float16")
            B_s = T.alloc_shared((64, 128), "float16")
            C_t = T.alloc_tmem([128, 128], "float32")
            bar = T.alloc_barrier(1)
            C_f = T.alloc_fragment((128, 128), "float32")
            T.copy(A, A_s)
            T.copy(B, B_s)
            for k in T.serial(4):
                T.gemm(A_s, B_s, C_t, mbar=bar, clear_accum=k == 0)
                T.gemm(A_s, B_s, C_t, mbar=bar)                  # second arrival on the same barrier
            T.copy(C_t, C_f)
            T.copy(C_f, C)

    src = _lower_source(two_mma, "sm_100a")
    waits = re.findall(r"bar\[0\]\.wait\(([^;]*)\);", src)
    assert waits == ["(k & 1)", "(k & 1)"], gone(
        f"both waits of one barrier use the loop's parity (found {waits})",
        "docs/emulator.md (the Races paragraph) and tilelang_tutorial/lessons/gemm/blackwell.py (one GEMM per barrier)")


# ------------------------------------------------------------------------------------------------
# 9c. A row-reduced fragment whose row is not a power of two of vectors: no layout
# ------------------------------------------------------------------------------------------------

def row_sum_program(C: int):
    @T.prim_func
    def row_sum(X: T.Tensor((64, C), "float16"), S: T.Tensor((64,), "float32")):
        with T.Kernel(8, threads=128) as bx:
            x = T.alloc_fragment((8, C), "float32")
            s = T.alloc_fragment((8,), "float32")
            T.copy(X[bx * 8, 0], x)
            T.reduce_sum(x, s, dim=1)
            T.copy(s, S[bx * 8])

    return row_sum


def test_9c_non_power_of_two_row_width_has_no_inferred_layout():
    from tilelang_tutorial import layouts

    err = build_error(lambda: layouts.infer_layouts(row_sum_program(96), arch="sm_90a"))
    assert err is not None, gone("layout inference finds no layout for an (8, 96) row-reduced fragment",
                                 "tilelang_tutorial/lessons/rmsnorm/kernel.py (row_group_layout) and two_pass.py "
                                 "(power-of-two block_C)")
    assert "no available layout found" in str(err), changed("9c", err)
    assert layouts.infer_layouts(row_sum_program(128), arch="sm_90a")["x"].replicate == 1


# ------------------------------------------------------------------------------------------------
# 9d. tilelang.tools.Analyzer counts global bytes in 32-bit integers
# ------------------------------------------------------------------------------------------------

def test_9d_analyzer_byte_count_wraps_at_32_bits():
    from tilelang.tools import Analyzer

    M, N = 32768, 24576                              # 2 * M * N * 2 B = 3 GiB moved

    @T.prim_func
    def big_copy(A: T.Tensor((M, N), "float16"), B: T.Tensor((M, N), "float16")):
        with T.Kernel(N // 128, M // 128, threads=128) as (bx, by):
            s = T.alloc_shared((128, 128), "float16")
            T.copy(A[by * 128, bx * 128], s)
            T.copy(s, B[by * 128, bx * 128])

    counted = int(Analyzer(big_copy, device=None).ir_pass().total_global_bytes)
    assert counted == 2 * M * N * 2 - 2**32, gone(f"Analyzer byte count overflow (counted {counted})",
                                                   "notebooks/02b_gemm_in_depth.ipynb (section 5 says it overflows)")


# ------------------------------------------------------------------------------------------------
# 9e. T.copy_cluster (TMA multicast) in a warp-specialized T.Pipelined loop: no wait on the peers
# ------------------------------------------------------------------------------------------------

def multicast_gemm(N: int = 4096, K: int = 4096, stages: int = 4):
    """Two 64-row tiles of C in a cluster of two along M, sharing B's tile by TMA multicast."""
    m = T.dynamic("m")

    @T.prim_func
    def gemm_multicast(A: T.Tensor((m, K), "float16"), B: T.Tensor((K, N), "float16"),
                       C: T.Tensor((m, N), "float16")):
        with T.Kernel(T.ceildiv(N, 64), T.ceildiv(m, 64), threads=128, cluster_dims=(1, 2, 1)) as (bx, by):
            A_s = T.alloc_shared((64, 64), "float16")
            B_s = T.alloc_shared((64, 64), "float16")
            acc = T.alloc_fragment((64, 64), "float32")
            T.clear(acc)
            for ko in T.Pipelined(T.ceildiv(K, 64), num_stages=stages):
                T.copy(A[by * 64, ko * 64], A_s)
                T.copy_cluster(B[ko * 64, bx * 64], B_s, cluster_mask=0b11)
                T.gemm(A_s, B_s, acc)
            T.copy(acc, C[by * 64, bx * 64])

    return gemm_multicast


def test_9e_pipelined_multicast_waits_only_on_its_own_ctas_consumers():
    source = _lower_source(multicast_gemm(), "sm_90a")
    producer = source[:source.index("tma_load_multicast")]
    waits = re.findall(r"mbarrier\[[^\]]*\]\.wait\(", producer)
    # the multicast is there, issued by rank 0 into both CTAs' stage ...
    assert "tl::block_rank_in_cluster() == 0" in producer and waits, source[:3000]
    # ... after a wait on this CTA's own "stage free" barrier alone: no barrier is cluster-scoped, no
    # consumer arrives at a peer's barrier (an arrive with a CTA id), nothing synchronizes the cluster
    remote = r"cluster_barrier|arrive_cluster|cluster_sync|cluster_arrive|cluster_wait|mapa|\.arrive\([^)]|mbarrier_arrive\("
    assert ".arrive();" in source and not re.search(remote, source), gone(
        "a pipelined T.copy_cluster now waits on the peer CTAs' consumers",
        "row 9e of the notes' table (a multicast GEMM needs a hand-written pipeline)")
