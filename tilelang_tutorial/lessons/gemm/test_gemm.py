"""GEMM + ReLU (notebook 02): compile-only checks on CPU, correctness on a GPU."""
import pytest
import torch

from tilelang_tutorial import checks, runtime
from tilelang_tutorial.lessons.gemm import kernel as gr

GPU = runtime.gpu_available()
requires_gpu = pytest.mark.skipif(not GPU, reason="needs a CUDA GPU")

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
        gr.gemm_relu(a, b)


def test_misaligned_view_rejected():
    base = _t(64 * 32 + 1)
    a = base[1:].view(64, 32)  # contiguous, but 2 bytes past a 16-byte boundary
    with pytest.raises(ValueError, match="16-byte"):
        gr.gemm_relu(a, _t(32, 16))


def test_bad_out_buffer():
    with pytest.raises(ValueError, match="out has shape"):
        gr.gemm_relu(_t(64, 32), _t(32, 16), out=_t(64, 15))


def test_tensors_must_be_where_kernels_run():
    a, b = _t(64, 32), _t(32, 16)
    if runtime.mode().can_run:
        with pytest.raises(ValueError, match="cuda device"):
            gr.gemm_relu(a, b)
    else:
        out = gr.gemm_relu(a, b)       # emulated: CPU tensors run in the tile emulator
        checks.assert_close(out, gr.gemm_relu_reference(a, b), tolerance=checks.TOLERANCE["float16"])


# ------------------------------------------------------------------------------------------------
# Compile-only: the generated CUDA for Hopper and for Ampere/Ada
# ------------------------------------------------------------------------------------------------

def _source(arch, config=gr.SEED_CONFIG):
    return gr.build_gemm_relu(DEMO_N, DEMO_K, config=config, arch=arch).get_kernel_source()


def test_sm90a_source_has_tma_mbarrier_wgmma_setmaxnreg():
    src = _source("sm_90a")
    assert "tma_load" in src                      # T.copy -> TMA bulk tensor loads
    assert "mbarrier" in src and ".wait(" in src  # the producer/consumer pipeline
    assert "warpgroup_reg_alloc" in src and "warpgroup_reg_dealloc" in src  # setmaxnreg
    assert "wgmma_ss" in src                      # T.gemm -> wgmma from shared memory
    assert "__launch_bounds__(256" in src         # 128 consumer threads + a producer warpgroup
    assert "rasterization2DColumn<4>" in src      # T.use_swizzle(4, order="column")
    assert "int m" in src                         # T.dynamic("m") became a kernel argument


@pytest.mark.parametrize("arch", ["sm_80", "sm_89"])
def test_ampere_ada_source_has_cp_async_and_mma(arch):
    src = _source(arch)
    assert "cp_async" in src and "mma_sync" in src
    assert "wgmma" not in src and "tma_load" not in src


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


@requires_gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("variant", ["seed", "tuned"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_gemm_relu_matches_reference(shape, dtype, variant):
    M, N, K = shape
    tdt = getattr(torch, dtype)
    a = checks.random_tensor((M, K), tdt, "cuda")
    b = checks.random_tensor((K, N), tdt, "cuda")
    out = checks.poisoned((M, N), tdt, "cuda")
    cfg = gr.SEED_CONFIG if variant == "seed" else gr.tuned_config(dtype)
    c = gr.gemm_relu(a, b, cfg, out=out)
    assert c is out and c.dtype == tdt
    checks.assert_close(c, gr.gemm_relu_reference(a, b), tolerance=checks.TOLERANCE[dtype],
                        what=f"gemm_relu {shape} {dtype} {cfg.name}")
    assert (c >= 0).all()


@requires_gpu
def test_one_dynamic_m_kernel_serves_many_m():
    N, K = 768, 512
    tdt = torch.float16
    b = checks.random_tensor((K, N), tdt, "cuda")
    gr.gemm_relu(checks.random_tensor((8, K), tdt, "cuda"), b, gr.SEED_CONFIG)
    before = gr._build.cache_info()
    for M in (1, 7, 128, 129, 1000, 4097):
        a = checks.random_tensor((M, K), tdt, "cuda")
        out = checks.poisoned((M, N), tdt, "cuda")
        gr.gemm_relu(a, b, gr.SEED_CONFIG, out=out)
        checks.assert_close(out, gr.gemm_relu_reference(a, b), tolerance=checks.TOLERANCE["float16"], what=f"M={M}")
    after = gr._build.cache_info()
    assert after.misses == before.misses, "a new M must not compile a new kernel"


@requires_gpu
def test_empty_and_k_zero():
    a = torch.empty((0, 64), dtype=torch.float16, device="cuda")
    b = checks.random_tensor((64, 32), torch.float16, "cuda")
    assert gr.gemm_relu(a, b).shape == (0, 32)
    a = torch.empty((5, 0), dtype=torch.float16, device="cuda")
    b = torch.empty((0, 32), dtype=torch.float16, device="cuda")
    assert torch.equal(gr.gemm_relu(a, b), torch.zeros(5, 32, dtype=torch.float16, device="cuda"))
