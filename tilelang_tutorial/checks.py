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
    per: str = ""   # what dimension 0 indexes, where each of its slices was judged on its own
    worst: int = 0  # the slice with the largest relative error (``rel_error`` is its error)
    slices: int = 0

    @property
    def ok(self) -> bool:
        return self.unwritten == 0 and self.nan == 0 and self.rel_error <= self.tolerance

    def __str__(self) -> str:
        verdict = "OK" if self.ok else "FAIL"
        where = f" in {self.per} {self.worst}, the worst of {self.slices}" if self.per else ""
        return (
            f"{verdict}: ||out-ref||/||ref|| = {self.rel_error:.2e}{where} (tolerance {self.tolerance:.0e}), "
            f"max |out-ref| = {self.max_abs_error:.2e}, unwritten elements = {self.unwritten}"
            + (f", NaN written = {self.nan}" if self.nan else "")
        )


def compare(out, ref, *, tolerance: float, per: str = "") -> Comparison:
    """Relative Frobenius error in fp64, a count of unwritten elements (still the poison) and one
    of NaNs the kernel wrote.

    ``per`` (e.g. ``"sequence"``): what dimension 0 indexes; each of its slices is then judged on
    its own and the relative error is the worst slice's, which the line names. A batch holds
    inputs built to expose different bugs (a sequence whose scores are far below zero, one whose
    sums pass fp16's range); over the whole tensor, one slice's error would be diluted by the
    others'."""
    import torch

    out64 = out.detach().to(torch.float64)
    ref64 = ref.detach().to(torch.float64)
    is_nan = torch.isnan(out64)
    unwritten_mask = poison_mask(out.detach())
    unwritten = int(unwritten_mask.sum().item())
    nan_written = int((is_nan & ~unwritten_mask.reshape(is_nan.shape)).sum().item())
    diff = torch.nan_to_num(out64, nan=0.0) - ref64
    worst, slices = 0, 0
    if per:
        slices = diff.shape[0]
        diff_norms = torch.linalg.vector_norm(diff.reshape(slices, -1), dim=1)
        ref_norms = torch.linalg.vector_norm(ref64.reshape(slices, -1), dim=1)
        errors = diff_norms / torch.where(ref_norms > 0, ref_norms, torch.ones_like(ref_norms))
        errors = torch.nan_to_num(errors, nan=float("inf"))
        worst = int(errors.argmax().item())
        rel_error = errors[worst].item()
    else:
        rel_error = torch.linalg.vector_norm(diff).item() / (torch.linalg.vector_norm(ref64).item() or 1.0)
    return Comparison(
        rel_error=rel_error,
        max_abs_error=diff.abs().max().item() if diff.numel() else 0.0,
        unwritten=unwritten,
        tolerance=tolerance,
        nan=nan_written,
        per=per,
        worst=worst,
        slices=slices,
    )


#: A log-sum-exp kept in fp32 is right to fp32's rounding of the scores it sums, a few 1e-7 of
#: their size: ``LSE_RTOL`` leaves a GPU's other summation order room. A denominator summed in fp16
#: is off by up to 2^-11 relative a step, about 7e-4 in log2 units: far outside.
LSE_ATOL, LSE_RTOL = 2e-5, 2e-6


@dataclass
class LseComparison:
    """Log-sum-exps (fp32, log2 units, ``-inf`` for an empty split) against an fp64 reference,
    element by element: ``|lse - ref| <= LSE_ATOL + LSE_RTOL * |ref|``."""
    worst: float         # the largest |lse - ref| / (LSE_ATOL + LSE_RTOL |ref|): at most 1 passes
    infinite: int        # elements -inf (or NaN) where the reference is finite, or finite where it is -inf
    unwritten: int       # elements still holding the poison

    @property
    def ok(self) -> bool:
        return self.unwritten == 0 and self.infinite == 0 and self.worst <= 1.0

    def __str__(self) -> str:
        verdict = "OK" if self.ok else "FAIL"
        return (f"{verdict}: |lse-ref| <= {LSE_ATOL:.0e} + {LSE_RTOL:.0e}|ref| (the worst at {self.worst:.2f} of "
                f"it), -inf where the reference is not = {self.infinite}, unwritten elements = {self.unwritten}")


def compare_lse(lse, ref) -> LseComparison:
    """Compare log-sum-exps element by element (see :class:`LseComparison`). Not relative error:
    a relative error of the sum (the softmax denominator) is an absolute error of its log."""
    import torch

    lse64, ref64 = lse.detach().to(torch.float64), ref.detach().to(torch.float64).to(lse.device)
    unwritten_mask = poison_mask(lse.detach())
    finite, expected_finite = torch.isfinite(lse64), torch.isfinite(ref64)
    infinite = int(((finite != expected_finite) & ~unwritten_mask).sum().item())
    both = finite & expected_finite
    excess = (lse64 - ref64).abs()[both] / (LSE_ATOL + LSE_RTOL * ref64.abs()[both])
    return LseComparison(worst=excess.max().item() if excess.numel() else 0.0, infinite=infinite,
                         unwritten=int(unwritten_mask.sum().item()))


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


# ------------------------------------------------------------------------------------------------
# Inputs that expose the classic bugs by construction (every lesson's checks draw from these)
# ------------------------------------------------------------------------------------------------

#: The tile sizes the lessons use (powers of two from 16 up): a checked size that is a multiple of
#: none of them leaves a partial last tile for every choice of block.
BLOCK_SIZES = (16, 32, 64, 128, 256, 512, 1024)

#: Two (M, N) shapes with a partial last tile for every block size in both dimensions, yet multiples
#: of 8, so fp16/bf16 rows stay 16-byte aligned and vectorised accesses still apply. Neither is
#: square, one is tall and one wide, and their tile counts differ: swapped grid extents, swapped
#: block indices and a grid of ``n // block`` blocks all leave elements unwritten in one of them.
RAGGED_SHAPES = ((200, 136), (72, 264))

#: Scalar values a kernel might have typed in (a default, a value an example used): a randomly
#: drawn scalar stays at least 10 % away from each of them.
TYPICAL_SCALARS = (0.0, 0.5, 1.0, 2.0, -0.5, -1.0, -2.0)


def is_ragged(n: int, blocks=BLOCK_SIZES) -> bool:
    """True when ``n`` is a multiple of none of ``blocks``."""
    return all(n % b for b in blocks)


def random_scalar(low: float = 0.25, high: float = 4.0, *, seed: int | None = None) -> float:
    """A scalar argument drawn at random from ``[low, high)``, at least 10 % away from every value of
    :data:`TYPICAL_SCALARS`: a kernel that ignores the argument and uses a typed-in value (``alpha``
    hard-coded as 0.5) cannot match by luck. Rounded to 4 significant digits, so it prints exactly."""
    import random

    rng = random.Random(seed)
    while True:
        value = float(f"{rng.uniform(low, high):.4g}")     # the rounding can reach ``high``: drawn again
        if low <= value < high and all(abs(value - t) > 0.1 * max(abs(t), 0.1) for t in TYPICAL_SCALARS):
            return value


def _generator(device, seed):
    import torch

    return None if seed is None else torch.Generator(device=device).manual_seed(seed)


def negative_rows(shape, dtype, device, *, nearest: float = -2.0, farthest: float = -3.0e4, seed: int | None = None):
    """Rows whose every value is negative, with row maxima spread evenly in log scale from
    ``nearest`` down to ``farthest`` (row 0 nearest): a running max that starts at 0, -1, -2 or
    -1e4 instead of -inf, or the missing columns of a last tile filled with such a value, wins in
    the rows below it. Each row's values lie between its max and twice its max (fp16 holds -6e4)."""
    import torch

    rows, cols = shape
    gen = _generator(device, seed)
    exponents = torch.linspace(float(torch.tensor(-nearest).log10()), float(torch.tensor(-farthest).log10()), rows,
                               device=device, dtype=torch.float64)
    row_max = -(10.0 ** exponents)
    spread = torch.rand((rows, cols), generator=gen, device=device, dtype=torch.float64)
    spread[torch.arange(rows, device=device), torch.randint(cols, (rows,), generator=gen, device=device)] = 0.0
    return (row_max[:, None] * (1.0 + spread)).to(dtype)


def large_rows(shape, dtype, device, *, smallest: float = 300.0, largest: float = 3.0e4, seed: int | None = None):
    """Rows of large magnitude: each row's scale runs from ``smallest`` to ``largest`` (log scale),
    so squares overflow fp16's 65,504 (|x| > 256) in every row: a sum of squares kept in fp16
    gives inf, and one in fp32 does not."""
    import torch

    rows, cols = shape
    gen = _generator(device, seed)
    scale = torch.logspace(torch.tensor(smallest).log10().item(), torch.tensor(largest).log10().item(), rows,
                           device=device, dtype=torch.float64)
    sign = torch.randint(0, 2, (rows, cols), generator=gen, device=device).double() * 2 - 1
    magnitude = 1.0 + torch.rand((rows, cols), generator=gen, device=device, dtype=torch.float64)
    return (sign * magnitude * scale[:, None] / 2).clamp(-6.0e4, 6.0e4).to(dtype)


def cancelling_operands(M: int, N: int, K: int, dtype, device, *, offset: float = 48.0, seed: int | None = None):
    """``(a, b)`` of shapes ``(M, K)`` and ``(K, N)`` whose product's running sums over K climb far
    past fp16's 65,504 and come back: ``a`` is ``offset`` plus random normal values, ``b`` is
    ``+offset`` in its first ``K // 2`` rows and ``-offset`` in the next ``K // 2`` (0 in a last odd
    row) plus random normal values. The ``offset**2`` terms cancel over K, so ``a @ b`` is of
    ordinary size (fp16 holds it), while an accumulator narrowed to fp16 overflows to inf once it
    has summed thirty of them, and has lost C's digits long before (its step at 8,192 is 8)."""
    import torch

    gen = _generator(device, seed)
    half = K // 2
    sign = torch.zeros((K, 1), device=device, dtype=torch.float32)
    sign[:half], sign[half:2 * half] = 1.0, -1.0
    a = offset + torch.randn((M, K), generator=gen, device=device, dtype=torch.float32)
    b = offset * sign + torch.randn((K, N), generator=gen, device=device, dtype=torch.float32)
    return a.to(dtype), b.to(dtype)


def near_zero_rows(shape, dtype, device, *, smallest: float = 1e-4, largest: float = 1e-2, seed: int | None = None):
    """Row 0 exactly zero, the others random with scales from ``largest`` down to ``smallest``
    (log scale): their mean squares (1e-4 to 1e-8) are comparable to a normalisation's eps, so a
    kernel that drops eps divides by 0 in row 0 and one that adds it in the wrong place is visibly
    off in the rows after."""
    import torch

    rows, cols = shape
    gen = _generator(device, seed)
    scale = torch.logspace(torch.tensor(largest).log10().item(), torch.tensor(smallest).log10().item(), rows,
                           device=device, dtype=torch.float64)
    x = torch.randn((rows, cols), generator=gen, device=device, dtype=torch.float64) * scale[:, None]
    x[0] = 0.0
    return x.to(dtype)


def lse_values(shape, device, *, highest: float = -120.0, spread: float = 500.0, seed: int | None = None):
    """fp32 log-sum-exp values (one per split of a split-KV attention, say) all very negative and
    spread by hundreds: between ``highest - spread`` and ``highest``, each row holding both ends.
    ``exp(lse)`` underflows to 0 in fp32 for every one (below -104), so a combine that exponentiates
    without subtracting the row's max first gives 0 / 0; and ``exp(lse - max)`` underflows for
    some splits and not others, so weights that ignore the spread are visibly wrong."""
    import torch

    gen = _generator(device, seed)
    lse = highest - spread * torch.rand(shape, generator=gen, device=device, dtype=torch.float32)
    flat = lse.reshape(-1, lse.shape[-1])
    flat[:, 0] = highest
    if lse.shape[-1] > 1:
        flat[:, -1] = highest - spread
    return lse


def padded_and_unpadded_widths(multiple: int, block: int, *, near: int | None = None) -> tuple[int, int]:
    """``(unpadded, padded)`` row widths near ``near`` (default ``4 * block``): ``unpadded`` is a
    multiple of ``block`` (no partial tile), ``padded`` a multiple of ``multiple`` but not of
    ``block``, so a kernel that rounds the width up to ``block`` must mask the padding."""
    if block % multiple or block == multiple:
        raise ValueError(f"block ({block}) must be a larger multiple of multiple ({multiple})")
    near = near or 4 * block
    unpadded = max(block, near // block * block)
    return unpadded, unpadded + multiple
