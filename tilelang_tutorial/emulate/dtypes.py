"""Data types: TIR dtype names <-> numpy (+ ml_dtypes) <-> torch, poison values, fast casts.

The emulator computes with numpy arrays whose dtype is the TIR dtype of the value: float16 with
numpy's half, bfloat16 and the float8 types with ``ml_dtypes`` (a dependency of TileLang). Every
store therefore rounds to the destination buffer's dtype (round to nearest even, as the GPU's
``cvt.rn``), and arithmetic happens in the dtype TIR gives the expression.

numpy converts float16 <-> float32 in software (~4 ns an element); large conversions go through
torch, which uses the CPU's F16C instructions -- same result, bit for bit.
"""
from __future__ import annotations

import numpy as np

try:  # ml_dtypes ships with TileLang; without it bfloat16/float8 are unsupported
    import ml_dtypes
except ImportError:  # pragma: no cover
    ml_dtypes = None

from .errors import UnsupportedConstruct

_NP: dict[str, np.dtype] = {
    "float16": np.dtype(np.float16), "float32": np.dtype(np.float32), "float64": np.dtype(np.float64),
    "int8": np.dtype(np.int8), "int16": np.dtype(np.int16), "int32": np.dtype(np.int32),
    "int64": np.dtype(np.int64), "uint8": np.dtype(np.uint8), "uint16": np.dtype(np.uint16),
    "uint32": np.dtype(np.uint32), "uint64": np.dtype(np.uint64), "bool": np.dtype(np.bool_),
}
if ml_dtypes is not None:
    _NP.update({
        "bfloat16": np.dtype(ml_dtypes.bfloat16),
        "float8_e4m3fn": np.dtype(ml_dtypes.float8_e4m3fn),
        "float8_e5m2": np.dtype(ml_dtypes.float8_e5m2),
    })
_ALIASES = {"float": "float32", "half": "float16", "int": "int32", "double": "float64",
            "float8_e4m3": "float8_e4m3fn"}

#: the CUDA type names TileLang's codegen gives each dtype, as ``debug.h`` prints them
#: (``dtype=<name>`` in T.print lines), with the printf conversion used for the value
PRINT_TYPES: dict[str, tuple[str, str]] = {
    "float32": ("float", "%f"), "float64": ("double", "%f"), "float16": ("half_t", "%f"),
    "bfloat16": ("bfloat16_t", "%f"), "float8_e4m3fn": ("fp8_e4_t", "%f"), "float8_e5m2": ("fp8_e5_t", "%f"),
    "int8": ("signed char", "%d"), "uint8": ("unsigned char", "%u"), "int16": ("short", "%d"),
    "uint16": ("unsigned short", "%u"), "int32": ("int", "%d"), "uint32": ("uint", "%u"),
    "int64": ("long", "%d"), "uint64": ("ulong", "%u"), "bool": ("bool", "%s"),
}

#: byte pattern of the poison written into fresh integer on-chip buffers (0xA5A5A5A5 = -1515870811
#: as int32): recognisable in an output, unlikely to be a plausible result
INT_POISON_BYTE = 0xA5


def canonical(dtype) -> str:
    s = str(dtype)
    return _ALIASES.get(s, s)


def np_dtype(dtype) -> np.dtype:
    """numpy dtype of a TIR dtype (name or ``tvm.DataType``); UnsupportedConstruct if none."""
    s = canonical(dtype)
    try:
        return _NP[s]
    except KeyError:
        if "x" in s and s.split("x")[-1].isdigit():
            raise UnsupportedConstruct(f"vector dtype {s}", "vector types (lanes > 1) do not appear in "
                                       "pre-lowering TileLang programs and are not emulated") from None
        raise UnsupportedConstruct(f"dtype {s}", "the emulator supports " + ", ".join(sorted(_NP))) from None


def is_float(dt: np.dtype) -> bool:
    return dt.kind == "f" or (ml_dtypes is not None and dt in (_NP.get("bfloat16"), _NP.get("float8_e4m3fn"),
                                                             _NP.get("float8_e5m2")))


def is_int(dt: np.dtype) -> bool:
    return dt.kind in "iu"


def poison_array(shape, dt: np.dtype) -> np.ndarray:
    """A fresh array of ``shape`` filled with the poison of ``dt`` (NaN, 0xA5.. bytes, True)."""
    if is_float(dt):
        return np.full(shape, np.nan, dtype=dt)
    if dt == np.bool_:
        return np.ones(shape, dtype=dt)
    arr = np.empty(shape, dtype=dt)
    arr.view(np.uint8).fill(INT_POISON_BYTE)
    return arr


def poison_value(dt: np.dtype):
    return poison_array((), dt)[()]


# ----------------------------------------------------------------------------------------------
# casts
# ----------------------------------------------------------------------------------------------
_TORCH_CAST_MIN = 2048          # elements; below this numpy's fixed cost is lower
_F16 = np.dtype(np.float16)
_F32 = np.dtype(np.float32)


def astype(x: np.ndarray, dt: np.dtype) -> np.ndarray:
    """``x.astype(dt)`` with round-to-nearest-even, fast for large float16 <-> float32 arrays.

    Float -> integer conversions follow the GPU's ``cvt.rzi.sat``: truncate toward zero, saturate
    at the type's range, NaN -> 0 (numpy alone would give an arbitrary value).
    """
    src = x.dtype
    if src == dt:
        return x
    if x.size >= _TORCH_CAST_MIN and ((src == _F16 and dt == _F32) or (src == _F32 and dt == _F16)):
        import torch
        return torch.from_numpy(np.ascontiguousarray(x)).to(_TORCH[canonical(dt)]).numpy()
    if is_int(dt) and is_float(src):
        return float_to_int(x, dt)
    if dt == np.bool_:
        return x != 0
    return x.astype(dt)


def float_to_int(x, dt: np.dtype):
    info = np.iinfo(dt)
    y = np.trunc(np.asarray(x, dtype=np.float64))
    y = np.nan_to_num(y, nan=0.0, posinf=info.max, neginf=info.min)
    y = np.clip(y, info.min, info.max)
    return y.astype(dt)


def cast_scalar(v, dt: np.dtype):
    """Scalar conversion with the same rules as :func:`astype`."""
    if dt == np.bool_:
        return bool(v)
    if is_int(dt):
        if isinstance(v, (float, np.floating)) or (hasattr(v, "dtype") and is_float(v.dtype)):
            return int(float_to_int(np.float64(v), dt))
        return int(wrap_int(int(v), dt))
    return dt.type(v)


def wrap_int(v: int, dt: np.dtype) -> int:
    """Two's-complement wrap of a Python int into ``dt``'s range."""
    bits = dt.itemsize * 8
    v &= (1 << bits) - 1
    if dt.kind == "i" and v >= 1 << (bits - 1):
        v -= 1 << bits
    return v


# ----------------------------------------------------------------------------------------------
# torch interop
# ----------------------------------------------------------------------------------------------
def _torch_map():
    import torch
    m = {"float16": torch.float16, "float32": torch.float32, "float64": torch.float64,
         "bfloat16": torch.bfloat16, "int8": torch.int8, "int16": torch.int16, "int32": torch.int32,
         "int64": torch.int64, "uint8": torch.uint8, "bool": torch.bool}
    for name in ("uint16", "uint32", "uint64"):
        if hasattr(torch, name):
            m[name] = getattr(torch, name)
    if hasattr(torch, "float8_e4m3fn"):
        m["float8_e4m3fn"] = torch.float8_e4m3fn
        m["float8_e5m2"] = torch.float8_e5m2
    return m


class _LazyTorchMap(dict):
    def __missing__(self, key):
        if not self:
            self.update(_torch_map())
            if key in self:
                return self[key]
        raise KeyError(key)


_TORCH = _LazyTorchMap()


def torch_dtype(dtype):
    return _TORCH[canonical(dtype)]


def torch_dtype_name(t) -> str:
    return str(t).replace("torch.", "")


def tensor_to_numpy(t) -> np.ndarray:
    """A zero-copy numpy view of a CPU torch tensor (bfloat16 / float8 through ml_dtypes)."""
    import torch
    t = t.detach()          # same storage: writes still land in the caller's tensor
    name = torch_dtype_name(t.dtype)
    if name == "bfloat16":
        return t.view(torch.int16).numpy().view(_NP["bfloat16"])
    if name in ("float8_e4m3fn", "float8_e5m2"):
        return t.view(torch.uint8).numpy().view(_NP[name])
    return t.numpy()


def slices_to_index_arrays(sl):
    """Index arrays (open mesh over the sliced dims, in buffer order) for out-of-range slices."""
    k = sum(isinstance(s, slice) for s in sl)
    out, j = [], 0
    for s in sl:
        if isinstance(s, slice):
            shape = [1] * k
            rng = np.arange(s.start, s.stop, s.step or 1, dtype=np.int64)
            shape[j] = rng.size
            out.append(rng.reshape(shape))
            j += 1
        else:
            out.append(np.asarray(s, dtype=np.int64))
    return out
