"""Correctness helpers: fresh random inputs, poisoned outputs, relative error against a reference."""
from __future__ import annotations

from dataclasses import dataclass

POISON = float("nan")


def random_tensor(shape, dtype, device, *, scale: float = 1.0, seed: int | None = None):
    """Fresh random normal data (never zeros: zeros hide wrong indexing and flatter timings)."""
    import torch

    gen = None
    if seed is not None:
        gen = torch.Generator(device=device).manual_seed(seed)
    return (torch.randn(shape, generator=gen, device=device, dtype=torch.float32) * scale).to(dtype)


def poisoned(shape, dtype, device):
    """An output buffer filled with NaN, so any element the kernel does not write shows up."""
    import torch

    return torch.full(shape, POISON, dtype=dtype, device=device)


@dataclass
class Comparison:
    rel_error: float
    max_abs_error: float
    unwritten: int  # elements still NaN (poison) in the output
    tolerance: float

    @property
    def ok(self) -> bool:
        return self.unwritten == 0 and self.rel_error <= self.tolerance

    def __str__(self) -> str:
        verdict = "OK" if self.ok else "FAIL"
        return (
            f"{verdict}: ||out-ref||/||ref|| = {self.rel_error:.2e} (tolerance {self.tolerance:.0e}), "
            f"max |out-ref| = {self.max_abs_error:.2e}, unwritten elements = {self.unwritten}"
        )


def compare(out, ref, *, tolerance: float) -> Comparison:
    """Relative Frobenius error in fp64, and a count of unwritten (NaN) elements."""
    import torch

    out64 = out.detach().to(torch.float64)
    ref64 = ref.detach().to(torch.float64)
    unwritten = int(torch.isnan(out64).sum().item())
    diff = torch.nan_to_num(out64, nan=0.0) - ref64
    denom = torch.linalg.vector_norm(ref64).item() or 1.0
    return Comparison(
        rel_error=torch.linalg.vector_norm(diff).item() / denom,
        max_abs_error=diff.abs().max().item() if diff.numel() else 0.0,
        unwritten=unwritten,
        tolerance=tolerance,
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
