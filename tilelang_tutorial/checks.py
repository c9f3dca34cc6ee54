"""Correctness helpers: fresh random inputs, poisoned outputs, relative error against a reference."""
from __future__ import annotations

from dataclasses import dataclass

POISON = float("nan")
#: The poison's bit pattern per float dtype: a quiet NaN with a payload that no arithmetic produces
#: (computed NaNs carry the canonical payload: 0x7FC00000/0xFFC00000 on CPUs, 0x7FFFFFFF on GPUs),
#: so an element still holding it was never written, and any other NaN was computed by the kernel.
POISON_BITS = {"float16": 0x7E5A, "bfloat16": 0x7FDA, "float32": 0x7FC5A5A5, "float64": 0x7FF8A5A5A5A5A5A5}
_BITS_VIEW = {16: "int16", 32: "int32", 64: "int64"}


def random_tensor(shape, dtype, device, *, scale: float = 1.0, seed: int | None = None):
    """Fresh random normal data (never zeros: zeros hide wrong indexing and flatter timings)."""
    import torch

    gen = None
    if seed is not None:
        gen = torch.Generator(device=device).manual_seed(seed)
    return (torch.randn(shape, generator=gen, device=device, dtype=torch.float32) * scale).to(dtype)


def poisoned(shape, dtype, device):
    """An output buffer filled with NaN, so any element the kernel does not write shows up (a
    payload NaN for float dtypes: :func:`compare` tells it from a NaN the kernel computed)."""
    import torch

    out = torch.full(shape, POISON, dtype=dtype, device=device)
    bits = POISON_BITS.get(str(dtype).replace("torch.", ""))
    if bits is not None:
        view = out.view(getattr(torch, _BITS_VIEW[out.element_size() * 8]))
        view.fill_(bits - (1 << out.element_size() * 8) if bits >= 1 << (out.element_size() * 8 - 1) else bits)
    return out


#: mantissa bits below the quiet bit, per float width: a NaN whose payload there is neither all
#: zeros (the CPU's computed NaN) nor all ones (the GPU's) carries the poison, also after a cast
#: between float dtypes (casts keep the payload's top bits).
_PAYLOAD = {"float16": 0x01FF, "bfloat16": 0x003F, "float32": 0x003FFFFF, "float64": 0x0007FFFFFFFFFFFF}


def poison_mask(out):
    """True where ``out`` still holds :func:`poisoned`'s NaN: never written. Compare the output
    buffer itself: a cast can canonicalise NaN payloads (torch's casts to bfloat16 always do), and
    then an unwritten element counts as a written NaN (still a failure, named differently)."""
    import torch

    name = str(out.dtype).replace("torch.", "")
    if not out.dtype.is_floating_point:
        return torch.zeros_like(out, dtype=torch.bool)
    if name not in _PAYLOAD:
        return torch.isnan(out)
    width = out.element_size() * 8
    payload = out.contiguous().view(getattr(torch, _BITS_VIEW[width])) & _PAYLOAD[name]
    return torch.isnan(out) & (payload != 0) & (payload != _PAYLOAD[name])


@dataclass
class Comparison:
    rel_error: float
    max_abs_error: float
    unwritten: int  # elements still holding the poison: never written
    tolerance: float
    nan: int = 0    # elements the kernel wrote as NaN (an accumulator never cleared, 0 * inf, ...)

    @property
    def ok(self) -> bool:
        return self.unwritten == 0 and self.nan == 0 and self.rel_error <= self.tolerance

    def __str__(self) -> str:
        verdict = "OK" if self.ok else "FAIL"
        return (
            f"{verdict}: ||out-ref||/||ref|| = {self.rel_error:.2e} (tolerance {self.tolerance:.0e}), "
            f"max |out-ref| = {self.max_abs_error:.2e}, unwritten elements = {self.unwritten}"
            + (f", NaN written = {self.nan}" if self.nan else "")
        )


def compare(out, ref, *, tolerance: float) -> Comparison:
    """Relative Frobenius error in fp64, a count of unwritten elements (still the poison) and one
    of NaNs the kernel wrote."""
    import torch

    out64 = out.detach().to(torch.float64)
    ref64 = ref.detach().to(torch.float64)
    is_nan = torch.isnan(out64)
    unwritten_mask = poison_mask(out.detach())
    unwritten = int(unwritten_mask.sum().item())
    nan_written = int((is_nan & ~unwritten_mask.reshape(is_nan.shape)).sum().item())
    diff = torch.nan_to_num(out64, nan=0.0) - ref64
    denom = torch.linalg.vector_norm(ref64).item() or 1.0
    return Comparison(
        rel_error=torch.linalg.vector_norm(diff).item() / denom,
        max_abs_error=diff.abs().max().item() if diff.numel() else 0.0,
        unwritten=unwritten,
        tolerance=tolerance,
        nan=nan_written,
    )


def assert_close(out, ref, *, tolerance: float, what: str = "output") -> Comparison:
    cmp = compare(out, ref, tolerance=tolerance)
    if not cmp.ok:
        raise AssertionError(f"{what}: {cmp}")
    return cmp


#: Relative-error tolerances by input dtype (fp32 accumulation inside the kernels).
TOLERANCE = {"float16": 2e-3, "bfloat16": 1.6e-2, "float32": 1e-5}


def check_tensor(t, name: str, *, dtype=None, device_type: str | None = "cuda", ndim: int | None = None,
                 shape=None, contiguous: bool = True) -> None:
    """Validate one input tensor; raise ValueError/TypeError naming the problem."""
    import torch

    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if dtype is not None:
        allowed = dtype if isinstance(dtype, (tuple, list)) else (dtype,)
        if t.dtype not in allowed:
            names = " or ".join(str(d).replace("torch.", "") for d in allowed)
            raise TypeError(f"{name} must be {names}, got {str(t.dtype).replace('torch.', '')}")
    if device_type is not None and t.device.type != device_type:
        raise ValueError(f"{name} must be on a {device_type} device, got {t.device} (move it with .to('{device_type}'))")
    if ndim is not None and t.dim() != ndim:
        raise ValueError(f"{name} must have {ndim} dimensions, got shape {tuple(t.shape)}")
    if shape is not None:
        for i, (have, want) in enumerate(zip(t.shape, shape)):
            if want is not None and have != want:
                raise ValueError(f"{name} has shape {tuple(t.shape)}; dimension {i} must be {want}")
    if contiguous and not t.is_contiguous():
        raise ValueError(f"{name} must be contiguous (got strides {t.stride()}); call .contiguous() first")


def first_problem(check, *args, **kwargs):
    """The ``TypeError``/``ValueError`` that ``check(*args, **kwargs)`` raises, or None: for an op
    whose compiled kernel refused an argument, so that the op's own checks name the problem in
    one line (``raise problem from None``) instead of the kernel's message."""
    try:
        check(*args, **kwargs)
    except (TypeError, ValueError) as problem:
        return problem
    return None
