"""GEMM + ReLU (notebook 02): compile-only checks on CPU, correctness on a GPU."""
import re

import pytest
import torch

from tilelang_tutorial import checks, runtime
from tilelang_tutorial.lessons.gemm import kernel as gr
from tilelang_tutorial.lessons.gemm import op

GPU = runtime.gpu_available()
requires_gpu = pytest.mark.gpu   # conftest skips it without a GPU; `pytest -m gpu` selects it

# The notebook builds the same (N, K, config, arch) keys, so TileLang's disk cache is shared.
DEMO_N = DEMO_K = 4096


# ------------------------------------------------------------------------------------------------
# Configuration and the 0.1.15 spelling of the swizzle order (no compile)
# ------------------------------------------------------------------------------------------------

def test_use_swizzle_col_raises_in_tilelang():
    # The seed's spelling reaches T.use_swizzle unvalidated when the factory is called directly.
    with pytest.raises(ValueError, match="Unsupported swizzle order"):
        gr.gemm_relu_program(256, 256, 256, swizzle_panel=4, swizzle_order="col")


def test_config_rejects_col_with_the_right_spelling():
    with pytest.raises(ValueError, match="'column'"):
        gr.GemmConfig(swizzle_order="col")


@pytest.mark.parametrize("bad", [dict(block_M=100), dict(threads=96), dict(policy="Diagonal"), dict(num_stages=0)])
def test_config_validation(bad):
    with pytest.raises(ValueError):
        gr.GemmConfig(**bad)


def test_seed_and_tuned_configs():
    assert (gr.SEED_CONFIG.block_M, gr.SEED_CONFIG.block_N, gr.SEED_CONFIG.block_K) == (128, 128, 64)
    assert (gr.SEED_CONFIG.num_stages, gr.SEED_CONFIG.threads) == (3, 128)
    assert set(gr.TUNED_CONFIGS) == set(gr.SUPPORTED_DTYPES)
    from tilelang_tutorial.inspector import launch_facts

    for dtype, cfg in gr.TUNED_CONFIGS.items():
        # The launch's dynamic shared memory must fit the H200's 227 KiB per block. (Counting
        # buffers overestimates: TileLang reuses the pipeline's buffers for the C tile.)
        kernel = gr.build_gemm_relu(4096, 4096, config=cfg, dtype=dtype, arch="sm_90a")
        smem = [int(b) for b in launch_facts(kernel)["dynamic_shared_bytes"]]
        assert smem and max(smem) <= 227 * 1024, (cfg.name, smem)


def test_reference_is_fp32_relu_of_matmul():
    a = torch.randn(5, 7, dtype=torch.float16)
    b = torch.randn(7, 3, dtype=torch.float16)
    ref = gr.gemm_relu_reference(a, b)
    assert ref.dtype == torch.float32
    torch.testing.assert_close(ref, torch.relu(a.float() @ b.float()))


# ------------------------------------------------------------------------------------------------
# Bad input: validation happens before require_gpu, so these errors are the same everywhere
# ------------------------------------------------------------------------------------------------

def _t(*shape, dtype=torch.float16):
    return torch.randn(*shape).to(dtype)


@pytest.mark.parametrize("a, b, exc, match", [
    (_t(64, 32, dtype=torch.float32), _t(32, 16, dtype=torch.float32), TypeError, "float16 or bfloat16"),
    (_t(64, 32), _t(32, 16, dtype=torch.bfloat16), TypeError, "same dtype"),
    (_t(64, 32), _t(48, 16), ValueError, "inner dimensions"),
    (_t(64, 32), _t(16, 32).t(), ValueError, "contiguous"),
    (_t(64), _t(64, 16), ValueError, "2 dimensions"),
    ("not a tensor", _t(32, 16), TypeError, "torch.Tensor"),
])
def test_bad_input_errors(a, b, exc, match):
    with pytest.raises(exc, match=match):
        op.gemm_relu(a, b)


def test_misaligned_view_rejected():
    base = _t(64 * 32 + 1)
    a = base[1:].view(64, 32)  # contiguous, but 2 bytes past a 16-byte boundary
    with pytest.raises(ValueError, match="16-byte"):
        op.gemm_relu(a, _t(32, 16))


def test_bad_out_buffer():
    with pytest.raises(ValueError, match="out has shape"):
        op.gemm_relu(_t(64, 32), _t(32, 16), out=_t(64, 15))


def test_tensors_must_be_where_kernels_run():
    a, b = _t(64, 32), _t(32, 16)
    if runtime.mode().can_run:
        with pytest.raises(ValueError, match="cuda device"):
            op.gemm_relu(a, b)
    else:
        out = op.gemm_relu(a, b)       # emulated: CPU tensors run in the tile emulator
        checks.assert_close(out, gr.gemm_relu_reference(a, b), tolerance=checks.TOLERANCE["float16"])


# ------------------------------------------------------------------------------------------------
# Compile-only: the generated CUDA for Hopper and for Ampere/Ada
# ------------------------------------------------------------------------------------------------

def _kernel(arch, config=gr.SEED_CONFIG):
    return gr.build_gemm_relu(DEMO_N, DEMO_K, config=config, arch=arch)


def _source(arch, config=gr.SEED_CONFIG):
    return _kernel(arch, config).get_kernel_source()


def test_sm90a_source_has_tma_mbarrier_wgmma_setmaxnreg():
    src = _source("sm_90a")
    assert "tma_load" in src                      # T.copy -> TMA bulk tensor loads
    assert "mbarrier" in src and ".wait(" in src  # the producer/consumer pipeline
    assert "warpgroup_reg_alloc" in src and "warpgroup_reg_dealloc" in src  # setmaxnreg
    assert "wgmma_ss" in src                      # T.gemm -> wgmma from shared memory
    assert "__launch_bounds__(256" in src         # 128 consumer threads + a producer warpgroup
    assert "rasterization2DColumn<4>" in src      # T.use_swizzle(4, order="column")
    assert "int m" in src                         # T.dynamic("m") became a kernel argument


def test_sm90a_b_tile_is_two_tma_boxes():
    """Notebook 02, section 5: A's 128 x 64 tile is one TMA box, B's 64 x 128 tile two boxes of 64
    columns (a box with the 128-byte swizzle is at most 128 bytes wide), 16 KiB each per stage."""
    src = _source("sm_90a")
    assert len(re.findall(r"tl::tma_load\(A_desc", src)) == 1
    assert re.search(r"for \(int i = 0; i < 2; \+\+i\) \{\s*tl::tma_load\(B_desc, [^;]*\(i \* 64\)\)", src), \
        "B's tile is no longer loaded as two boxes of 64 columns"
    assert "expect_transaction(16384)" in src and "arrive_and_expect_tx(16384)" in src
    assert "warpgroup_reg_dealloc<24>" in src and "warpgroup_reg_alloc<240>" in src
    assert len(re.findall(r"mbarrier\[\d\]\.init", src)) == 2 * gr.SEED_CONFIG.num_stages
    assert sorted(set(re.findall(r"wgmma_ss<[^>]*?, (\d+, \d+, \d+),", src))) == ["64, 128, 16"]


@pytest.mark.parametrize("arch", ["sm_80", "sm_89"])
def test_ampere_ada_source_has_cp_async_and_mma(arch):
    src = _source(arch)
    assert "cp_async" in src and "mma_sync" in src
    assert "wgmma" not in src and "tma_load" not in src
    assert "__launch_bounds__(128" in src and "ldmatrix" in src and "cp_async_wait<2>" in src
    assert sorted(set(re.findall(r"mma_sync<[^>]*?, (\d+, \d+, \d+),", src))) == ["16, 8, 16"]


def test_register_arithmetic_matches_ptxas():
    """Notebook 02, section 7: the 128 x 256 tile spills with one consumer warpgroup, not with two."""
    from tilelang_tutorial.inspector import resource_usage

    usage = {}
    for name, cfg in (("seed", gr.SEED_CONFIG), ("wide, 128 threads", gr.SEED_CONFIG.replace(block_N=256)),
                      ("tuned", gr.TUNED_CONFIGS["float16"])):
        (usage[name],) = resource_usage(gr.build_gemm_relu(DEMO_N, DEMO_K, config=cfg, arch="sm_90a")).values()
    assert usage["seed"]["spill_stores"] == 0 and usage["tuned"]["spill_stores"] == 0, usage
    assert usage["wide, 128 threads"]["spill_stores"] > 0, usage
    # and ptxas, short of registers, gives up pipelining its wgmma: a wait after each (C7511)
    assert usage["wide, 128 threads"]["wgmma_serialized"] == "insufficient register resources for the wgmma pipeline"
    assert "wgmma_serialized" not in usage["seed"] and "wgmma_serialized" not in usage["tuned"], usage


def test_lower_trace_shows_the_passes_the_notebook_names():
    """Notebook 02, section 6: warp specialization and the pipeline appear in
    ProducerConsumerWarpSpecialized; TMA loads and wgmma in LowerTileOp; the tensor maps (boxes
    64 x 128 for A, 64 x 64 for B, 128-byte swizzle, zero fill) in LowerHopperIntrin."""
    import contextlib
    import io
    import tempfile

    import tilelang
    from tilelang.tools import lower_trace

    tilelang.disable_cache()
    try:
        with tempfile.TemporaryDirectory() as trace_dir, contextlib.redirect_stdout(io.StringIO()):
            lower_trace.enable(mode="html", trace_dir=trace_dir)
            runtime.compile_kernel(gr.gemm_relu_program(4096, 4096, 4096), arch="sm_90a")
            trace = lower_trace.core.get_last_session().records
            lower_trace.disable()
    finally:
        tilelang.enable_cache()
    steps = {step.name: step for step in trace}
    specialized = steps["ProducerConsumerWarpSpecialized"]
    assert specialized.changed and "if tx < 128:" in specialized.after_text
    assert "(3, 128, 64)" in specialized.after_text and "T.tma_copy(" in specialized.after_text
    assert not steps["InjectSoftwarePipeline"].changed

    def first(piece):
        return next(s.name for s in trace if piece in s.after_text and piece not in s.before_text)

    assert first("T.tma_load(") == first("T.ptx_wgmma_ss(") == "LowerTileOp"
    assert first("T.set_max_nreg(") == "AnnotateWarpGroupRegAlloc"
    maps = re.findall(r'T\.call_packed\("__tvm_tensormap_create_tiled", (.*)\)', steps["LowerHopperIntrin"].after_text)
    assert maps == ["A_desc, 6, 2, A, 4096, 4096, 2, 8192, 64, 128, 1, 1, 0, 3, 2, 0",
                    "B_desc, 6, 2, B, 4096, 4096, 2, 8192, 64, 64, 1, 1, 0, 3, 2, 0"], maps


def test_analyzer_counts_and_its_overflow():
    """Notebook 02, section 6: tilelang.tools.Analyzer counts 2MNK and the tiles' traffic; its byte
    count overflows 32 bits at 4096^3 in 0.1.15 (the notebook says so: update it if this changes)."""
    from tilelang.tools import Analyzer

    for block_N, a_reads in ((128, 16), (256, 8)):
        counts = Analyzer(gr.gemm_relu_program(2048, 2048, 2048, block_N=block_N), device=None).ir_pass()
        assert int(counts.total_flops) == 2 * 2048**3
        assert int(counts.total_global_bytes) == 2 * 2048 * 2048 * (a_reads + 16 + 1)
    big = Analyzer(gr.gemm_relu_program(4096, 4096, 4096), device=None).ir_pass()
    assert int(big.total_global_bytes) + 2**32 == 2 * 4096 * 4096 * (32 + 32 + 1)


def test_compile_only_source_equals_the_compiled_source():
    """Notebook 02, section 6: compile_kernel_source writes the nvcc-compiled CUDA plus #line lines."""
    from tilelang.tools.compile_only import compile_kernel_source

    from tilelang_tutorial.inspector import kernel_source

    program = gr.gemm_relu_program(None, DEMO_N, DEMO_K, dynamic_m=True)
    text = compile_kernel_source(program, target=runtime.target("sm_90a"))
    kept = "\n".join(line for line in text.splitlines() if not line.startswith("#line"))
    assert "#line" in text
    assert kernel_source(_kernel("sm_90a")).strip() in kept


def test_tuned_config_compiles_to_wide_wgmma():
    cfg = gr.TUNED_CONFIGS["float16"]
    src = _source("sm_90a", cfg)
    consumers = cfg.threads
    assert f"__launch_bounds__({consumers + 128}" in src
    if cfg.policy == "FullRow" and cfg.block_M == 64 * (cfg.threads // 128):
        assert f", 64, {cfg.block_N}, 16," in src   # each consumer warpgroup issues m64n{block_N}k16


def test_dynamic_m_kernel_is_cached():
    k1 = gr.build_gemm_relu(DEMO_N, DEMO_K, config=gr.SEED_CONFIG, arch="sm_90a")
    k2 = gr.build_gemm_relu(DEMO_N, DEMO_K, config=gr.SEED_CONFIG, arch="sm_90a")
    assert k1 is k2


# ------------------------------------------------------------------------------------------------
# Benchmarks/plots helpers (no GPU, no figures presented as measured)
# ------------------------------------------------------------------------------------------------

def test_sweep_grid_is_unique_and_small():
    from tilelang_tutorial.lessons.gemm import bench

    names = [c.name for c in bench.SWEEP_CONFIGS]
    assert len(names) == len(set(names))
    assert 12 <= len(names) <= 30
    assert gr.SEED_CONFIG in bench.SWEEP_CONFIGS
    assert all(c in bench.SWEEP_CONFIGS for c in gr.TUNED_CONFIGS.values())


def test_sweep_and_run_need_a_gpu():
    if GPU:
        pytest.skip("GPU present")
    from tilelang_tutorial.lessons.gemm import bench

    with pytest.raises(runtime.NoGPUError):
        bench.sweep(configs=[gr.SEED_CONFIG])
    with pytest.raises(runtime.NoGPUError):
        bench.run(quick=True)


# ------------------------------------------------------------------------------------------------
# GPU: correctness with poisoned outputs
# ------------------------------------------------------------------------------------------------

# tile multiple; ragged everywhere; ragged M with TMA-friendly N, K; N, K not multiples of 8 (no TMA).
SHAPES = [(1024, 1024, 1024), (300, 264, 200), (3001, 1000, 1000), (129, 1001, 999)]


@pytest.fixture(scope="module", autouse=True)
def _compile_gpu_kernels_in_parallel():
    """On a GPU, compile this module's kernels in parallel threads up front (each compile is
    seconds of CPU; the parametrized tests then hit the lru_cache)."""
    if GPU:
        from tilelang_tutorial.lessons.gemm.bench import compile_many

        jobs = {(N, K, cfg, dt) for (_, N, K) in SHAPES for dt in gr.SUPPORTED_DTYPES
                for cfg in (gr.SEED_CONFIG, gr.tuned_config(dt))}
        jobs.add((768, 512, gr.SEED_CONFIG, "float16"))
        compile_many(sorted(jobs, key=str), verbose=False)
    yield


def _assert_the_op_contract(shape, dtype, variant, device):
    """The op's contract for an explicit configuration: the tuned configuration on a shape whose N or
    K is not a multiple of 8 is refused with one line naming the problem, before anything compiles;
    every other (shape, configuration) runs and matches the fp32 reference, every element written."""
    M, N, K = shape
    tdt = getattr(torch, dtype)
    a = checks.random_tensor((M, K), tdt, device)
    b = checks.random_tensor((K, N), tdt, device)
    out = checks.poisoned((M, N), tdt, device)
    cfg = gr.SEED_CONFIG if variant == "seed" else gr.tuned_config(dtype)
    if variant == "tuned" and (N % 8 or K % 8):
        with pytest.raises(ValueError, match="not a multiple of 8") as refused:
            op.gemm_relu(a, b, cfg, out=out)
        assert "\n" not in str(refused.value) and f"N={N}, K={K}" in str(refused.value), str(refused.value)
        assert rule.choose(M, N, K, dtype).config == rule.seed_config(runtime.current_arch())   # config=None
        return
    c = op.gemm_relu(a, b, cfg, out=out)
    assert c is out and c.dtype == tdt
    checks.assert_close(c, gr.gemm_relu_reference(a, b), tolerance=checks.TOLERANCE[dtype],
                        what=f"gemm_relu {shape} {dtype} {cfg.name}")
    assert (c >= 0).all()


@requires_gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("variant", ["seed", "tuned"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_gemm_relu_matches_reference(shape, dtype, variant):
    _assert_the_op_contract(shape, dtype, variant, "cuda")


@pytest.mark.usefixtures("without_nvcc")   # checks numbers: the emulator, no nvcc needed
@pytest.mark.parametrize("variant", ["seed", "tuned"])
def test_the_op_contract_on_an_unaligned_shape_anywhere(variant):
    """The GPU test's logic where this machine runs kernels (the emulator on CPU tensors without a
    GPU): 129 x 1001 x 999, N and K not multiples of 8 -- the tuned configuration refused in one
    line, the seed configuration run and checked."""
    _assert_the_op_contract((129, 1001, 999), "float16", variant, runtime.mode().device)


@requires_gpu
def test_one_dynamic_m_kernel_serves_many_m():
    N, K = 768, 512
    tdt = torch.float16
    b = checks.random_tensor((K, N), tdt, "cuda")
    op.gemm_relu(checks.random_tensor((8, K), tdt, "cuda"), b, gr.SEED_CONFIG)
    before = gr._build.cache_info()
    for M in (1, 7, 128, 129, 1000, 4097):
        a = checks.random_tensor((M, K), tdt, "cuda")
        out = checks.poisoned((M, N), tdt, "cuda")
        op.gemm_relu(a, b, gr.SEED_CONFIG, out=out)
        checks.assert_close(out, gr.gemm_relu_reference(a, b), tolerance=checks.TOLERANCE["float16"], what=f"M={M}")
    after = gr._build.cache_info()
    assert after.misses == before.misses, "a new M must not compile a new kernel"


@requires_gpu
def test_empty_and_k_zero():
    a = torch.empty((0, 64), dtype=torch.float16, device="cuda")
    b = checks.random_tensor((64, 32), torch.float16, "cuda")
    assert op.gemm_relu(a, b).shape == (0, 32)
    a = torch.empty((5, 0), dtype=torch.float16, device="cuda")
    b = torch.empty((0, 32), dtype=torch.float16, device="cuda")
    assert torch.equal(op.gemm_relu(a, b), torch.zeros(5, 32, dtype=torch.float16, device="cuda"))


# ------------------------------------------------------------------------------------------------
# Any shape: the rule, the split-K path, the unaligned path
# ------------------------------------------------------------------------------------------------
from tilelang_tutorial.lessons.gemm import rule, split_k  # noqa: E402


def test_unaligned_shapes_take_the_seed_configuration():
    choice = rule.choose(77, 1001, 512, "float16", "sm_90a")
    assert choice.config == gr.SEED_CONFIG and choice.split == 1 and "multiple of 8" in choice.why


def test_a_large_config_on_an_unaligned_shape_is_one_line_before_compiling(monkeypatch):
    import tilelang

    monkeypatch.setattr(tilelang, "compile", lambda *a, **k: pytest.fail("reached the compiler"))
    a, b = _t(64, 1000), _t(1000, 1001)
    with pytest.raises(ValueError, match="not a multiple of 8") as info:
        op.gemm_relu(a, b, gr.tuned_config("float16"))
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("arch", runtime.ACCEPTED_ARCHS)
def test_the_rule_never_picks_a_tile_that_does_not_fit(arch):
    """Every architecture the tutorial knows, sm_75 (a T4's 64 KiB) included, aligned and unaligned
    shapes; and the seed, the tuned and the narrow tile, fitted to each architecture, fit it."""
    shapes = [(1, 4096, 4096), (16, 7168, 2048), (4096, 4096, 4096), (3001, 5000, 4040), (77, 1001, 520)]
    limit = runtime.ARCHS[arch].smem_per_block
    for shape in shapes:
        choice = rule.choose(*shape, "float16", arch)
        assert rule.smem_bytes(choice.config) <= limit, (arch, shape, choice)
    assert rule.fits(rule.seed_config(arch), arch)
    for cfg in (gr.SEED_CONFIG, gr.tuned_config("float16"), rule.NARROW):
        assert rule.fits(rule.fitted(cfg, arch), arch)


def test_the_seed_is_fitted_only_where_it_does_not_fit():
    """The recorded H200 configurations are untouched: only a T4 gets another seed, with two stages."""
    for arch in runtime.ACCEPTED_ARCHS:
        fits = rule.smem_bytes(gr.SEED_CONFIG) <= runtime.ARCHS[arch].smem_per_block
        assert (rule.seed_config(arch) == gr.SEED_CONFIG) == fits, arch
    assert [a for a in runtime.ACCEPTED_ARCHS if rule.seed_config(a) != gr.SEED_CONFIG] == ["sm_75"]
    turing = rule.seed_config("sm_75")
    assert turing == gr.SEED_CONFIG.replace(num_stages=2) and rule.smem_bytes(turing) == 64 * 1024
    choice = rule.choose(4096, 4096, 4096, "float16", "sm_75")
    assert choice.config == turing and "64 KiB" in choice.why
    assert rule.choose(77, 1001, 520, "float16", "sm_75").config == turing
    assert rule.choose(4096, 4096, 4096, "float16", "sm_90a").config == gr.tuned_config("float16")
    assert rule.choose(77, 1001, 520, "float16", "sm_90a").config == gr.SEED_CONFIG
    # stages go first (down to two), then block_K
    assert rule.fitted(gr.tuned_config("float16"), "sm_75").num_stages == 2
    assert rule.fitted(gr.SEED_CONFIG.replace(block_N=256), "sm_75").block_K == 32


def test_the_t4_seed_compiles_for_sm75_within_its_shared_memory():
    """What the rule builds on a T4 at 4096 x 4096, compiled for sm_75 (no T4 needed): TileLang's
    launch asks for at most 64 KiB, ptxas spills nothing, and the code is Turing's (mma.sync m16n8k8 fed by
    ldmatrix, plain 16-byte loads, no cp.async, no TMA, no wgmma)."""
    if runtime.nvcc_path() is None:
        pytest.skip("needs nvcc")
    from tilelang_tutorial.inspector import kernel_ptx, resource_usage

    N = K = 4096
    kernel = gr.build_gemm_relu(N, K, config=rule.choose(64, N, K, "float16", "sm_75").config, arch="sm_75")
    assert runtime.dynamic_shared_memory(kernel) == 64 * 1024 <= runtime.ARCHS["sm_75"].smem_per_block
    (usage,) = resource_usage(kernel).values()
    assert usage["spill_stores"] == 0 and usage["spill_loads"] == 0, usage
    ptx = kernel_ptx(kernel)
    assert set(re.findall(r"mma\.sync\.aligned\.(m\d+n\d+k\d+)", ptx)) == {"m16n8k8"}
    assert "ldmatrix" in ptx and "ld.global.nc.v4" in ptx
    assert not re.search(r"cp\.async|wgmma|tcgen05|setmaxnreg", ptx)


def test_on_a_t4_the_op_builds_what_fits(monkeypatch):
    """A faked T4 (GPU mode, sm_75): the op's build goes through compile_kernel's shared-memory
    check, which refuses the 96 KiB seed, and passes with the rule's choice (no launch here)."""
    if runtime.nvcc_path() is None:
        pytest.skip("needs nvcc")
    for var in (runtime.ARCH_ENV, runtime.EMULATE_ENV):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (7, 5))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "Tesla T4")
    runtime.invalidate_mode()
    try:
        assert (runtime.mode().name, runtime.mode().arch) == ("gpu", "sm_75")
        choice = rule.choose(300, 4096, 4096, "float16")
        assert choice.config == rule.seed_config("sm_75")
        program = gr.gemm_relu_program(None, 4096, 4096, dynamic_m=True, **choice.config.as_dict())
        kernel = runtime.compile_kernel(program)                  # the check runs: GPU mode, arch sm_75
        assert runtime.dynamic_shared_memory(kernel) <= runtime.ARCHS["sm_75"].smem_per_block
        with pytest.raises(runtime.ArchError, match="96 KiB"):
            runtime.compile_kernel(gr.gemm_relu_program(None, 4096, 4096, dynamic_m=True, **gr.SEED_CONFIG.as_dict()))
    finally:
        monkeypatch.undo()
        runtime.invalidate_mode()


def test_hopper_takes_the_measured_path_and_other_targets_the_seed():
    assert rule.choose(1, 4096, 4096, "float16", "sm_90a").gemv == rule.GEMV_ONE_ROW
    assert rule.choose(4096, 4096, 4096, "float16", "sm_90a").config == gr.tuned_config("float16")
    assert rule.choose(16, 4096, 4096, "float16", "sm_120").config == gr.SEED_CONFIG


#: the tile (and split of K) the H200 measured fastest at each shape, among the tiles without the
#: swap: the rule (``swap=False``) must pick it
SWEEP_WINNERS = {
    (1, 4096, 4096): "gemv", (8, 4096, 4096): "m64n64k128s4", (16, 4096, 4096): "m64n64k128s4",
    (32, 4096, 4096): "m64n64k64s8",
    (64, 4096, 4096): "m64n32k256s4", (128, 4096, 4096): "m64n64k128s4",
    (1, 8192, 2048): "gemv", (16, 8192, 2048): "m64n64k64s8", (64, 8192, 2048): "m64n64k64s8",
    (128, 8192, 2048): "m128n64k64s6",
    (1, 2048, 8192): "m64n64k128s4/k4", (32, 2048, 8192): "m64n64k128s4/k4", (128, 2048, 8192): "m64n32k256s4",
    (1, 8192, 8192): "gemv", (16, 8192, 8192): "m64n128k64s4/k2", (64, 8192, 8192): "m64n64k64s8",
    (128, 8192, 8192): "m128n64k64s6",
    (8, 1864, 1064): "m64n64k128s4", (279, 1304, 3000): "narrow", (234, 5816, 3208): "m128n128k128t256",
    (650, 3744, 8056): "tuned",
    # 256-row tiles fill one wave
    (1228, 3504, 5280): "m256n144", (1083, 4936, 7152): "m256n192", (639, 7280, 6608): "m256n192",
    # few blocks over a long K, split
    (183, 1248, 5024): "m64n64k128s4/k2", (228, 2336, 5672): "m128n128k128t256/k3",
    # two or three waves of 256-row tiles would leave much of the last one empty: 192 x 192
    (1322, 6472, 7288): "m192n192",
}


@pytest.mark.parametrize("shape", sorted(SWEEP_WINNERS), ids=lambda s: "x".join(map(str, s)))
def test_the_rule_picks_what_the_sweep_measured_fastest(shape):
    choice = rule.measured_choice(*shape, "float16", swap=False)
    got = choice.name + (f"/k{choice.split}" if choice.split > 1 else "")
    assert got == SWEEP_WINNERS[shape], (shape, choice.label, choice.why)


#: one case per path of the rule through the op, each at the smallest shape that takes it, ragged
#: where the path allows (a multiple of no block in M, N and K): {path: (shape, dtype, its label)}.
#: The dtypes alternate; the clamped and the swapped shapes are the ones test_last_rows.py's op
#: tests run, so their kernels compile once.
RULE_PATHS = {
    "GEMV": ((1, 4104, 72), "float16", "gemv max_m=1 block_N=32 k_lanes=64 unroll=8"),
    "short box, K split": ((3, 264, 4104), "bfloat16", "64x64x128-s4-t128-Square-nosw/k4 (short 8)"),
    "short box": ((17, 200, 328), "float16", "64x64x128-s4-t128-Square-nosw (short 24)"),
    "clamped second row": ((70, 3144, 72), "float16", "64x64x128-s4-t128-Square-nosw (clamped)"),
    "two boxes": ((100, 4232, 72), "bfloat16", "128x64x64-s6-t128-Square-nosw (two boxes)"),
    "128 x 64, K split in one wave": ((93, 2184, 4104), "float16", "128x64x64-s6-t128-Square-nosw/k3"),
    "the waves pick": ((200, 136, 264), "bfloat16", "64x128x64-s4-t128-Square-sw4c"),
    "few blocks, K split": ((129, 200, 4104), "bfloat16", "64x64x128-s4-t128-Square-nosw/k4"),
    "swapped": ((300, 264, 200), "float16", "48x64x64-s8-t128-FullRow-nosw-smemC (swapped)"),
}


@pytest.mark.usefixtures("without_nvcc")   # checks numbers: the emulator, no nvcc needed
@pytest.mark.parametrize("path", list(RULE_PATHS))
def test_every_path_of_the_rule_matches_the_reference(path):
    """Each of the rule's paths (the GEMV, the short box with and without a split of K, the clamped
    second row, the two boxes, the 128 x 64 tile with K split, the waves pick past 128 rows and its
    few-block split, the swapped kernel) taken at its shape and run through the op: poisoned
    output, fp32 reference."""
    (M, N, K), dtype, label = RULE_PATHS[path]
    assert rule.choose(M, N, K, dtype, "sm_90a").label == label, "the shape no longer takes this path"
    device = runtime.mode().device
    tdt = getattr(torch, dtype)
    a, b = checks.random_tensor((M, K), tdt, device), checks.random_tensor((K, N), tdt, device)
    out = checks.poisoned((M, N), tdt, device)
    op.gemm_relu(a, b, out=out)
    checks.assert_close(out, gr.gemm_relu_reference(a, b), tolerance=checks.TOLERANCE[dtype],
                        what=f"{path}: {M}x{N}x{K} {dtype} {label}")


#: the tall tiles run below: 256 rows (two 128-row consumer warpgroups) at the narrowest width, at
#: one that is not a power of two, and at the widest (three stages); the 192-row tile (three
#: consumer warpgroups of 64 rows). The other widths are the same program at other widths.
TALL_TILES = ("m256n128", "m256n176", "m256n192", "m192n192")


def test_the_tall_tiles_run_cover_each_kind_of_tall_tile():
    tall = {n: c for n, c, _ in rule.LARGE_M_TILES if n.startswith(("m256", "m192"))}
    assert set(TALL_TILES) <= set(tall)
    assert {(c.block_M, c.threads) for c in tall.values()} == {(tall[n].block_M, tall[n].threads) for n in TALL_TILES}
    widths = [c.block_N for c in tall.values() if c.block_M == 256]
    assert {min(widths), max(widths)} <= {tall[n].block_N for n in TALL_TILES}


@pytest.mark.usefixtures("without_nvcc")   # checks numbers: the emulator, no nvcc needed
@pytest.mark.parametrize("name", TALL_TILES)
def test_each_tall_tile_matches_the_reference(name):
    """The rule's tall tiles through the op on a shape ragged in M, N and K against each tile
    (300 = 256 + 44 or 192 + 108 rows, 296 columns, K = 200 = 3 x 64 + 8), where this machine runs
    kernels: poisoned output, fp32 reference, every element written."""
    cfg = dict((n, c) for n, c, _ in rule.LARGE_M_TILES)[name]
    device = runtime.mode().device
    M, N, K = 300, 296, 200
    a, b = checks.random_tensor((M, K), torch.float16, device), checks.random_tensor((K, N), torch.float16, device)
    out = checks.poisoned((M, N), torch.float16, device)
    op.gemm_relu(a, b, cfg, out=out)
    checks.assert_close(out, gr.gemm_relu_reference(a, b), tolerance=checks.TOLERANCE["float16"],
                        what=f"{name} ({cfg.name}) on {M}x{N}x{K}")


@pytest.mark.parametrize("M,N,K,split", [(5, 264, 1000, 3), (130, 200, 648, 4)])
def test_split_k_matches_the_reference_in_the_emulator(M, N, K, split):
    from tilelang_tutorial import emulate

    cfg = rule.NARROW
    a, b = checks.random_tensor((M, K), torch.float16, "cpu"), checks.random_tensor((K, N), torch.float16, "cpu")
    w = torch.full((split, M, N), float("nan"))
    c = checks.poisoned((M, N), torch.float16, "cpu")
    emulate.run(split_k.gemm_partial_program(N, K, split, **split_k._partial_knobs(cfg)), a, b, w)
    emulate.run(split_k.splitk_reduce_relu_program(N, split), w, c)
    checks.assert_close(c, gr.gemm_relu_reference(a, b), tolerance=checks.TOLERANCE["float16"],
                        what=f"split-K {split} on {M}x{N}x{K}")


def test_recorded_rule_figures_are_what_the_rule_picks_today():
    """A record of the op names the kernel the rule chose then; if the rule now picks another for
    that shape, the record no longer describes what gemm_relu runs."""
    from tilelang_tutorial import results

    for r in (results.find("gemm", config=lambda c: c.get("variant") == "rule")
              + results.find("gemm_rule", config=lambda c: c.get("variant") == "rule")):
        s, c = r["shape"], r["config"]
        now = rule.choose(s["M"], s["N"], s["K"], r["dtype"], c["arch"])
        assert now.as_dict() == {k: c[k] for k in now.as_dict()}, (s, now, c)


ANY_SHAPES = [(1, 1001, 1000), (77, 1001, 515), (300, 264, 203), (5, 4096, 4096), (16, 7168, 2048),
              (129, 2648, 1920), (3001, 5000, 4040)]


@requires_gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("shape", ANY_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_gpu_any_shape_through_the_rule(shape, dtype):
    M, N, K = shape
    tdt = getattr(torch, dtype)
    a, b = checks.random_tensor((M, K), tdt, "cuda"), checks.random_tensor((K, N), tdt, "cuda")
    out = checks.poisoned((M, N), tdt, "cuda")
    op.gemm_relu(a, b, out=out)
    checks.assert_close(out, gr.gemm_relu_reference(a, b), tolerance=checks.TOLERANCE[dtype],
                        what=f"gemm_relu {shape} {dtype} ({rule.choose(M, N, K, dtype)})")


@requires_gpu
@pytest.mark.parametrize("split", [2, 3, 5])
@pytest.mark.parametrize("shape", [(1, 4096, 4096), (77, 1000, 3000), (128, 7168, 2048)],
                         ids=lambda s: "x".join(map(str, s)))
def test_gpu_split_k_path(shape, split):
    M, N, K = shape
    a, b = checks.random_tensor((M, K), torch.bfloat16, "cuda"), checks.random_tensor((K, N), torch.bfloat16, "cuda")
    out = checks.poisoned((M, N), torch.bfloat16, "cuda")
    partial, reduce = split_k.build_split_k(N, K, split, rule.NARROW, "bfloat16")
    workspace = torch.empty((split, M, N), dtype=torch.float32, device="cuda")
    runtime.run(partial, a, b, workspace)
    runtime.run(reduce, workspace, out)
    checks.assert_close(out, gr.gemm_relu_reference(a, b), tolerance=checks.TOLERANCE["bfloat16"],
                        what=f"split-K {split} {shape}")


# ------------------------------------------------------------------------------------------------
# Unaligned rows, other architectures, Blackwell: what the generated code shows
# ------------------------------------------------------------------------------------------------
needs_nvcc = pytest.mark.skipif(runtime.nvcc_path() is None, reason="needs nvcc")


@needs_nvcc
def test_tuned_tile_with_exactly_one_unaligned_dimension_fails_in_ptxas():
    """Section 8: N = 1001 (B's rows not 16-byte aligned), K = 520 (A's aligned). Only A is a TMA
    tensor, the plain-load producer doubles to 256 threads (512 launched) without setmaxnreg, and
    ptxas runs out of registers; the rule takes the seed for that shape, which compiles."""
    import tilelang
    from tilelang.tools.compile_only import compile_kernel_source

    from tilelang_tutorial.exercise_kit import quiet_tilelang

    program = gr.gemm_relu_program(None, 1001, 520, dynamic_m=True, **gr.tuned_config("float16").as_dict())
    src = compile_kernel_source(program, target=runtime.target("sm_90a"))
    assert "__launch_bounds__(512, 1)" in src and "warpgroup_reg_alloc" not in src
    assert "tma_load(A_desc" in src and "tma_load(B_desc" not in src
    tilelang.disable_cache()
    try:
        with quiet_tilelang(), pytest.raises(Exception, match=r"Insufficient registers \(128\)"):
            runtime.compile_kernel(program, arch="sm_90a")
    finally:
        tilelang.enable_cache()
    assert rule.choose(77, 1001, 520, "float16", "sm_90a").config == gr.SEED_CONFIG
    gr.build_gemm_relu(1001, 520, config=gr.SEED_CONFIG, arch="sm_90a")      # compiles


def test_sm120_gets_the_seed_and_no_warp_specialization_on_the_portable_target():
    """Section 8: the tuned tile (192 KiB) does not fit sm_120's 99 KiB; the seed (96 KiB) does."""
    assert rule.smem_bytes(gr.tuned_config("float16")) == 192 * 1024
    assert rule.smem_bytes(gr.SEED_CONFIG) == 96 * 1024
    for arch in ("sm_120", "sm_120a"):
        assert runtime.ARCHS[arch].smem_per_block // 1024 == 99
        assert not rule.fits(gr.tuned_config("float16"), arch) and rule.fits(gr.SEED_CONFIG, arch)
        assert rule.choose(4096, 4096, 4096, "float16", arch).name == "seed"
    assert dict(runtime.ARCHS["sm_120"].pass_configs) == {"tl.disable_warp_specialized": True}
    assert dict(runtime.ARCHS["sm_120a"].pass_configs) == {}


def _ptx_counts(ptx):
    patterns = {"mma.sync": r"\bmma\.sync\.", "ldmatrix": r"\bldmatrix\.", "cp.async": r"\bcp\.async\.c[ag]\.",
                "wgmma": r"\bwgmma\.mma_async\.", "tma": r"\bcp\.async\.bulk\.tensor\.",
                "tcgen05.mma": r"\btcgen05\.mma\.", "tcgen05.ld": r"\btcgen05\.ld\."}
    return {name: len(re.findall(pattern, ptx)) for name, pattern in patterns.items()}


@needs_nvcc
def test_ptx_instruction_table_across_architectures():
    """Section 5: the fragment program on sm_80 (cp.async, ldmatrix, mma.sync), sm_90a (TMA, wgmma),
    sm_100a (TMA with mma.sync, no tcgen05), and the TMEM program on sm_100a (tcgen05.mma, one
    tcgen05.ld, no mma.sync / ldmatrix / wgmma)."""
    from tilelang_tutorial.inspector import kernel_ptx
    from tilelang_tutorial.lessons.gemm.blackwell import build_gemm_relu_tmem

    counts = {arch: _ptx_counts(kernel_ptx(_kernel(arch))) for arch in ("sm_80", "sm_90a", "sm_100a")}
    tmem = _ptx_counts(kernel_ptx(build_gemm_relu_tmem(DEMO_N, DEMO_K, arch="sm_100a")))
    nonzero = lambda c: {name for name, n in c.items() if n}  # noqa: E731
    assert nonzero(counts["sm_80"]) == {"mma.sync", "ldmatrix", "cp.async"}, counts
    assert nonzero(counts["sm_90a"]) == {"wgmma", "tma"}, counts
    assert nonzero(counts["sm_100a"]) == {"mma.sync", "ldmatrix", "tma"}, counts
    assert nonzero(tmem) == {"tma", "tcgen05.mma", "tcgen05.ld"} and tmem["tcgen05.ld"] == 1, tmem


def test_tmem_consumer_loop_waits_for_each_stage_s_mmas():
    """Section 5: one consumer warp issues a stage's four k16 tcgen05 MMAs, commits them to mma_done,
    and the warpgroup waits on it before freeing the stage; TMEM is read once, after the loop."""
    from tilelang_tutorial.inspector import kernel_source
    from tilelang_tutorial.lessons.gemm.blackwell import build_gemm_relu_tmem

    src = kernel_source(build_gemm_relu_tmem(DEMO_N, DEMO_K, arch="sm_100a"))
    consumer = src[src.index("} else {"):]
    assert re.search(r"\(\(\(\(int\)threadIdx\.x\) >> 5\) == 4\) \{", consumer)
    assert re.search(r"for \(int ki = 0; ki < 4; \+\+ki\) \{\s*tl::tcgen05mma_ss<", consumer)
    assert re.search(r"tcgen05_mma_arrive\(\(&\(mma_done\[[^\n]*\n\s*\}\s*\n\s*mma_done\[[^\]]*\]\.wait\(", consumer)
    assert consumer.count("tcgen05_ld_") == 1 and consumer.index("tcgen05_ld_") > consumer.rindex("mma_done[")


def test_tmem_program_is_refused_off_sm100():
    """Section 5: TileLang 0.1.15 refuses tensor memory on the RTX 50xx targets (and on Hopper)."""
    import tilelang

    from tilelang_tutorial.exercise_kit import quiet_tilelang
    from tilelang_tutorial.lessons.gemm.blackwell import gemm_relu_tmem_program

    for arch in ("sm_120a", "sm_120", "sm_90a"):
        with quiet_tilelang(), pytest.raises(Exception, match="must be a fragment"):
            tilelang.lower(gemm_relu_tmem_program(256, 256, 256), target=runtime.target(arch))


# ------------------------------------------------------------------------------------------------
# Notebook 02's reading of the generated code, and the reader's kernel reaching the op
# ------------------------------------------------------------------------------------------------
from tilelang_tutorial.lessons.gemm import plots, reading  # noqa: E402
from tilelang_tutorial.exercise_kit import mutated  # noqa: E402

#: the excerpt notebook 02 prints (section 4): who runs the K loop, the producer's copies and the consumer's wgmma
NOTEBOOK_02_EXCERPT = dict(start=r"threadIdx.x\) < 128", stop=r"wgmma_ss<", keep=r"for \(int ko|tma_load\(|else \{")


@pytest.mark.parametrize("config", [gr.SEED_CONFIG, gr.tuned_config("float16"), gr.SEED_CONFIG.replace(block_K=32)],
                         ids=lambda c: c.name)
def test_the_notebook_02_excerpt_is_short_and_shows_who_runs_the_k_loop(config):
    """The one idea notebook 02 reads: the producer's TMA copies, then the consumer's wgmma; for the seed,
    the tuned configuration and an edited default alike (the excerpt follows the reader's kernel cell)."""
    lines = reading.excerpt_lines(_source("sm_90a", config), **NOTEBOOK_02_EXCERPT)
    assert len(lines) <= 8, lines
    text = "\n".join(lines)
    for piece in ("tma_load(A_desc", "tma_load(B_desc", "} else {", "wgmma_ss<"):
        assert piece in text, (piece, text)
    assert text.index("tma_load(A_desc") < text.index("} else {") < text.index("wgmma_ss<"), text
    assert f", 64, {config.block_N}, 16," in lines[-1], lines[-1]


#: the excerpt notebook 02b prints (section 3): both warpgroups' whole K loops
NOTEBOOK_02B_EXCERPT = dict(start=r"threadIdx.x\) < 128", stop=r"\]\.arrive\(\)",
                            keep=r"reg_(de)?alloc|for \(int (ko|i = 0; i < 2)|\.wait\(|expect_transaction\(|tma_load\(|else \{|wgmma_ss<")


def test_the_notebook_02b_excerpt_shows_the_mbarriers_setmaxnreg_and_the_boxes_it_names():
    lines = reading.excerpt_lines(_source("sm_90a"), **NOTEBOOK_02B_EXCERPT)
    assert len(lines) <= 15, lines
    text = "\n".join(lines)
    for piece in ("warpgroup_reg_dealloc<", "warpgroup_reg_alloc<", "expect_transaction(", "tma_load(A_desc",
                  "tma_load(B_desc", "for (int i = 0; i < 2", "} else {", ".wait(", "wgmma_ss<", "].arrive()"):
        assert piece in text, (piece, text)


def test_the_architecture_table_reads_cp_async_wait_from_the_code():
    ampere = _source("sm_80")
    row = reading.generated_features(ampere)
    waits = sorted(set(re.findall(r"cp_async_wait<\d+>", ampere)))
    assert waits and row["pipeline synchronisation"] == ", ".join(waits), row
    assert row["tensor-core instruction"] == "mma_sync m16n8k16" and row["threads launched"] == "128", row
    hopper = reading.generated_features(_source("sm_90a"))
    assert hopper["pipeline synchronisation"] == "mbarrier wait / arrive" and hopper["threads launched"] == "256", hopper


def _no_relu_program(M, N, K, block_M=128, block_N=128, block_K=64, num_stages=3, threads=128, policy="Square",
                     swizzle_panel=4, swizzle_order="column", in_dtype="float16", accum_dtype="float32",
                     dynamic_m=False, store_via_shared=False):
    import tilelang.language as T

    m = T.dynamic("m") if dynamic_m else M

    @T.prim_func
    def gemm_relu_kernel(A: T.Tensor((m, K), in_dtype), B: T.Tensor((K, N), in_dtype), C: T.Tensor((m, N), in_dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(m, block_M), threads=threads) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), in_dtype)
            B_shared = T.alloc_shared((block_K, block_N), in_dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[by * block_M, ko * block_K], A_shared)
                T.copy(B[ko * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return gemm_relu_kernel


@pytest.mark.usefixtures("without_nvcc")   # checks numbers: the emulator, no nvcc needed
def test_the_op_builds_the_factory_it_is_given():
    """Notebook 02 passes its kernel cell to the op (program=): a reader's bug must reach the output."""
    device = runtime.mode().device
    a = checks.random_tensor((40, 72), torch.float16, device)
    b = checks.random_tensor((72, 48), torch.float16, device)
    ref = gr.gemm_relu_reference(a, b)
    assert checks.compare(op.gemm_relu(a, b, program=gr.gemm_relu_program), ref, tolerance=2e-3).ok
    buggy = op.gemm_relu(a, b, program=_no_relu_program)
    assert (buggy < 0).any() and not checks.compare(buggy, ref, tolerance=2e-3).ok


def test_the_recorded_figure_says_whether_the_readers_cell_was_measured():
    from tilelang_tutorial import report

    records = report.records("gemm", where={"dtype": "float16", "shape.K": [2048, 4096, 8192]})
    assert records, "no current gemm records"
    assert all(plots.builds_the_measured_program(gr.gemm_relu_program, r) for r in records)
    assert not any(plots.builds_the_measured_program(_no_relu_program, r) for r in records)
    assert "package's copy, not of your edit" in plots.whose_figures(_no_relu_program, records)
    assert "the figures are your kernel's" in plots.whose_figures(gr.gemm_relu_program, records)
    edited_default = mutated(gr.gemm_relu_program, ("block_K=64,", "block_K=32,"))     # the body unchanged
    assert all(plots.builds_the_measured_program(edited_default, r) for r in records)
    assert "defaults (128x128x32-s3-t128-Square-sw4c) are not the seed" in plots.whose_figures(edited_default, records)
    # a K loop of K // block_K steps builds the measured programs (K is a multiple of every block_K
    # there) and drops K's partial last step where there is one: not the measured kernel
    k_floor = mutated(gr.gemm_relu_program, ("T.Pipelined(T.ceildiv(K, block_K)", "T.Pipelined(K // block_K"))
    assert all(plots.builds_the_measured_program(k_floor, r) for r in records)
    assert all(map(checks.is_ragged, plots.RAGGED_N_K))
    assert "another program than the package's at N = 264, K = 200" in plots.whose_figures(k_floor, records)


@pytest.mark.usefixtures("without_nvcc")   # checks numbers: the emulator, no nvcc needed
def test_a_repeated_call_reuses_its_plan_and_new_data_still_gets_the_right_answer(monkeypatch):
    """The second call with the same key neither re-validates nor asks the rule again, and computes
    from the new tensors (checked against the fp32 reference, poisoned output)."""
    from tilelang_tutorial.lessons.gemm import rule as gemm_rule

    device = runtime.mode().device
    op.clear_plans()
    a, b = checks.random_tensor((3, 64), torch.float16, device), checks.random_tensor((64, 32), torch.float16, device)
    op.gemm_relu(a, b, gr.SEED_CONFIG)          # the kernel of the tests below (N = 32, K = 64)
    calls, validate = [], op.validate_inputs
    monkeypatch.setattr(op, "validate_inputs", lambda *x, **k: calls.append("validate") or validate(*x, **k))
    monkeypatch.setattr(gemm_rule, "choose", lambda *x, **k: pytest.fail("asked the rule again"))
    a2, b2 = checks.random_tensor((3, 64), torch.float16, device), checks.random_tensor((64, 32), torch.float16, device)
    out = checks.poisoned((3, 32), torch.float16, device)
    op.gemm_relu(a2, b2, gr.SEED_CONFIG)                     # same key as the first call: the plan
    c = op.gemm_relu(a2, b2, gr.SEED_CONFIG, out=out)        # a new key (an out): validated once
    assert c is out
    checks.assert_close(out, gr.gemm_relu_reference(a2, b2), tolerance=checks.TOLERANCE["float16"], what="plan")
    assert calls == ["validate"]


@pytest.mark.usefixtures("without_nvcc")   # checks numbers: the emulator, no nvcc needed
def test_bad_input_with_a_planned_key_is_still_refused_in_one_line():
    """What the key does not fix (the data's contiguity, a view's 16-byte alignment) is checked on
    every call; a bad tensor of a planned shape gets the same one-line error as a first call."""
    device = runtime.mode().device
    op.clear_plans()
    a, b = checks.random_tensor((4, 64), torch.float16, device), checks.random_tensor((64, 32), torch.float16, device)
    op.gemm_relu(a, b, gr.SEED_CONFIG)
    strided = checks.random_tensor((64, 64), torch.float16, device)[:, ::2]          # (64, 32), not contiguous
    with pytest.raises(ValueError, match="b must be contiguous") as info:
        op.gemm_relu(a, strided, gr.SEED_CONFIG)
    assert "\n" not in str(info.value)
    offset = checks.random_tensor((4 * 64 + 1,), torch.float16, device)[1:].view(4, 64)   # 2 bytes past a boundary
    with pytest.raises(ValueError, match="16-byte boundary"):
        op.gemm_relu(offset, b, gr.SEED_CONFIG)
    out = checks.poisoned((4, 64), torch.float16, device)[:, ::2]
    with pytest.raises(ValueError, match="out must be contiguous"):
        op.gemm_relu(a, b, gr.SEED_CONFIG, out=out)
    with pytest.raises(TypeError, match="same dtype"):
        op.gemm_relu(a, b.to(torch.bfloat16), gr.SEED_CONFIG)
    with pytest.raises(TypeError, match="must be a torch.Tensor"):
        op.gemm_relu(a.tolist(), b, gr.SEED_CONFIG)


@pytest.mark.usefixtures("without_nvcc")   # checks numbers: the emulator, no nvcc needed
def test_a_changed_mode_is_a_new_plan(monkeypatch):
    """A plan is used only under the mode it was made in: forcing emulation, or another
    architecture, is never served a plan made for the other mode (a repeat call in one mode is)."""
    op.clear_plans()
    plans, real_plan = [], op._plan
    monkeypatch.setattr(op, "_plan", lambda *args: plans.append(runtime.mode()) or real_plan(*args))

    def call():
        device = runtime.mode().device           # a GPU's mode becomes emulation under another arch
        a = checks.random_tensor((2, 64), torch.float16, device)
        b = checks.random_tensor((64, 32), torch.float16, device)
        checks.assert_close(op.gemm_relu(a, b, gr.SEED_CONFIG), gr.gemm_relu_reference(a, b),
                            tolerance=checks.TOLERANCE["float16"])
    call()
    call()
    assert len(plans) == 1, "a repeat call in the same mode reuses its plan"
    monkeypatch.setenv(runtime.ARCH_ENV, "sm_80")
    call()
    assert len(plans) == 2 and plans[1].arch == "sm_80" and plans[0].arch != "sm_80"
    monkeypatch.delenv(runtime.ARCH_ENV)
    call()
    assert len(plans) == 3 and plans[2].arch == plans[0].arch, "back in the first mode: planned again"


def test_random_shapes_are_drawn_afresh_and_the_small_m_set_covers_the_widths():
    from tilelang_tutorial.lessons.gemm import bench

    first, second = bench.random_shapes(), bench.random_shapes()
    assert first != second                                   # a fresh seed each run
    assert bench.random_shapes(seed=7) == bench.random_shapes(seed=7)
    for M, N, K, dt in first:
        assert 1 <= M <= 8192 and 512 <= N <= 8192 and 512 <= K <= 8192 and N % 8 == 0 == K % 8
    small = bench.small_m_shapes(seed=3)
    widths = {(N, K) for _, N, K, _ in small}
    assert set(bench.SMALL_M_WIDTHS) < widths and len(widths) == len(bench.SMALL_M_WIDTHS) + 1
    (N, K), = widths - set(bench.SMALL_M_WIDTHS)
    assert 2048 <= N <= 8192 and 2048 <= K <= 8192 and N % 64 == 0 == K % 64
    assert len({bench.small_m_shapes(seed=s)[4][1:3] for s in range(8)}) > 1      # the drawn width varies
    assert all(len({(N, K) for M, N, K, _ in small if M == m}) == 5 for m in {M for M, *_ in small})
    drawn = sorted({M for M, *_ in small} - set(bench.SMALL_M_FIXED))
    assert len(drawn) == 2 and all(2 <= M <= 127 for M in drawn)
    sets, seed = bench.rule_sets(quick=True, seed=11)
    assert seed == 11 and {name for name, _ in sets} == {"random", "small M"}
    full, _ = bench.rule_sets(seed=11)
    assert sum(name == "random" for name, _ in full) == bench.RANDOM_COUNT >= 24


def test_a_plan_whose_kernels_check_their_arguments_still_names_a_refused_one_in_one_line():
    """On the GPU a plan of tvm_ffi kernels skips the op's contiguity checks (the kernel asserts the
    strides itself); when the kernel refuses an argument the op re-validates and raises its own one
    line; a valid input whose kernel fails for another reason gets the kernel's error unchanged."""
    device = runtime.mode().device
    op.clear_plans()
    a, b = checks.random_tensor((4, 64), torch.float16, device), checks.random_tensor((64, 32), torch.float16, device)
    op.gemm_relu(a, b, gr.SEED_CONFIG)
    (key,) = op._LAUNCHERS.entries

    def kernel_refuses(a, b, config, out, program):
        raise RuntimeError("kernel gemm_relu_kernel input B strides[0] violates packed ABI constraint")
    op._LAUNCHERS.entries[key] = (kernel_refuses, True, runtime.mode())
    strided = checks.random_tensor((64, 64), torch.float16, device)[:, ::2]
    with pytest.raises(ValueError, match="b must be contiguous") as info:
        op.gemm_relu(a, strided, gr.SEED_CONFIG)
    assert "\n" not in str(info.value)
    with pytest.raises(RuntimeError, match="violates packed ABI"):
        op.gemm_relu(a, b, gr.SEED_CONFIG)
    op.clear_plans()
