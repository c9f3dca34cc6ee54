"""The PRE-EXISTING production path: a hand-tuned Triton RMSNorm + SiLU for D in {96, 192, 384}.

In the story of notebook 05 this module was already in the codebase before the TileLang kernel:
a VAE whose channel widths were 96, 192 and 384 got a fused Triton kernel with one tuned launch
configuration per width. A newer model needs other widths; rather than touch this kernel (or its
call sites), :mod:`.dispatch` keeps routing these three widths here and sends
everything else to the TileLang kernel. Nothing here calls TileLang.

    y = silu(x / sqrt(mean(x^2, -1) + eps) * gamma)       fp16/bf16 in and out, fp32 inside

Kernel shape: each program normalises ``ROWS`` rows; a row is one padded power-of-two block of
``BLOCK_C`` >= D columns (Triton tensors have power-of-two extents), the padding lanes masked off.
Because D is a compile-time constant that is a multiple of 8, Triton can prove the masks are
constant over 8-element groups and still emits 16-byte vector loads and stores.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from ... import runtime

DEFAULT_EPS = 1e-5

#: The widths this kernel was written and tuned for, with their launch configurations:
#: D -> (BLOCK_C, ROWS per program, num_warps). BLOCK_C is the padded row; ROWS * BLOCK_C = 2048.
TUNED_CONFIGS = {
    96: (128, 16, 4),
    192: (256, 8, 4),
    384: (512, 4, 4),
}
SUPPORTED_WIDTHS = tuple(sorted(TUNED_CONFIGS))


@triton.jit
def _rmsnorm_silu_kernel(X, Gamma, Y, M, eps, D: tl.constexpr, BLOCK_C: tl.constexpr, ROWS: tl.constexpr):
    pid = tl.program_id(0)
    rows = pid * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK_C)
    col_ok = cols < D
    mask = (rows < M)[:, None] & col_ok[None, :]
    offs = rows.to(tl.int64)[:, None] * D + cols[None, :]
    x = tl.load(X + offs, mask=mask, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(x * x, axis=1) / D + eps)
    g = tl.load(Gamma + cols, mask=col_ok, other=0.0).to(tl.float32)
    v = x * rstd[:, None] * g[None, :]
    y = v * tl.sigmoid(v)
    tl.store(Y + offs, y.to(Y.dtype.element_ty), mask=mask)


def _launch(x2d, gamma, y2d, eps: float) -> None:
    """Launch on (M, D) contiguous tensors (also runs under TRITON_INTERPRET=1 on CPU tensors)."""
    M, D = x2d.shape
    block_c, rows, num_warps = TUNED_CONFIGS[D]
    grid = (triton.cdiv(M, rows),)
    _rmsnorm_silu_kernel[grid](x2d, gamma, y2d, M, eps, D=D, BLOCK_C=block_c, ROWS=rows, num_warps=num_warps)


def check_inputs(x, gamma, out=None) -> None:
    """Raise one line naming the first problem with the inputs of :func:`rmsnorm_silu_triton`."""
    if not isinstance(x, torch.Tensor) or x.dtype not in (torch.float16, torch.bfloat16):
        raise TypeError(f"rmsnorm_silu_triton: x must be a float16 or bfloat16 tensor, got "
                        f"{getattr(x, 'dtype', type(x).__name__)}")
    D = int(x.shape[-1]) if x.dim() else 0
    if D not in TUNED_CONFIGS:
        raise ValueError(f"rmsnorm_silu_triton is specialised for D in {SUPPORTED_WIDTHS}; got D = {D}")
    if not isinstance(gamma, torch.Tensor) or gamma.dtype != x.dtype or tuple(gamma.shape) != (D,):
        raise ValueError(f"rmsnorm_silu_triton: gamma must be a ({D},) {str(x.dtype)[6:]} tensor, got "
                         f"{tuple(getattr(gamma, 'shape', ()))} {getattr(gamma, 'dtype', type(gamma).__name__)}")
    if not x.is_contiguous() or not gamma.is_contiguous():
        raise ValueError(f"rmsnorm_silu_triton: x and gamma must be contiguous; got x strides {x.stride()}")
    if out is not None:
        if not isinstance(out, torch.Tensor) or out.dtype != x.dtype or out.shape != x.shape \
                or not out.is_contiguous():
            raise ValueError(f"rmsnorm_silu_triton: out must be a contiguous {str(x.dtype)[6:]} tensor of "
                             f"shape {tuple(x.shape)}")
    for name, t in (("x", x), ("gamma", gamma)) + ((("out", out),) if out is not None else ()):
        if t.device.type != "cuda":
            raise ValueError(f"rmsnorm_silu_triton: {name} must be on a CUDA device, got {t.device}")


def _plan(x, gamma, eps, out):
    """Check the inputs in full, then the launch of every later call with the same key (:func:`_key`):
    the grid and the configuration bound once, the kernel launched on the tensors as they are
    (contiguous, so their flat layout is the kernel's (M, D) rows)."""
    check_inputs(x, gamma, out)
    D = x.shape[-1]
    M = x.numel() // D
    block_c, rows, num_warps = TUNED_CONFIGS[D]
    bound = _rmsnorm_silu_kernel[(triton.cdiv(M, rows),)]
    device = x.device

    def launch(x, gamma, eps, out):
        y = torch.empty_like(x) if out is None else out
        if M:
            bound(x, gamma, y, M, eps, D=D, BLOCK_C=block_c, ROWS=rows, num_warps=num_warps)
        return y

    def launch_on_its_device(x, gamma, eps, out):
        with torch.cuda.device(device):
            return launch(x, gamma, eps, out)
    # the key holds every attribute check_inputs reads (kernels=None): see runtime.Launchers
    return (launch if device.index == torch.cuda.current_device() else launch_on_its_device), None


def _key(x, gamma, out):
    """Every attribute :func:`check_inputs` reads but the data pointers, and the current device
    (the launch is bound to run on x's). A device is keyed by its index (``get_device()``, -1 off
    the GPU): cheaper than a ``torch.device``, and a key with -1 is never planned, since the checks
    refuse such a tensor."""
    k = (x.shape, x.dtype, x.get_device(), x.is_contiguous(), gamma.shape, gamma.dtype, gamma.get_device(),
         gamma.is_contiguous(), torch.cuda.current_device() if x.is_cuda else None)
    return k if out is None else k + (out.shape, out.dtype, out.get_device(), out.is_contiguous())


def _check(x, gamma, eps, out) -> None:
    check_inputs(x, gamma, out)


#: one launch per key, planned by :func:`_plan` (see ``runtime.Launchers``)
_LAUNCHERS = runtime.Launchers(_plan, _check)


def rmsnorm_silu_triton(x, gamma, eps: float = DEFAULT_EPS, out=None):
    """y = silu(rms_norm(x) * gamma) over the last dim, for D = x.shape[-1] in {96, 192, 384}.
    The checks run once per combination of shapes, dtypes, devices and contiguity; a later call
    with the same costs a dictionary lookup and the Triton launch."""
    try:
        key = _key(x, gamma, out)
    except (AttributeError, TypeError):      # not tensors: the checks say what is wrong
        key = None
    return _LAUNCHERS(runtime.mode(), key, x, gamma, eps, out)
