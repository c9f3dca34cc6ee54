"""Device window 1 (helper `host`, issue 24 goal 1; ran against commit 8a6c9bd, whose plan.run
compared every input's shape, dtype, device and contiguity -- the "variant" below is what
plan.run does on the GPU since): where the per-call host time of scale_copy,
row_sum and MLADecodePlan.run goes on the H200's host, with CUDA tensors.

1. host-only costs of the attribute reads the fast paths make (no kernel, no sync);
2. each op's Python with its kernel call replaced by a no-op, against the bare no-op call;
3. the real op against the real bare call, back to back (host_cost.per_call_us, synchronised per
   loop), for the op as committed and for a variant of plan.run that compares only the shapes in
   Python and leaves dtype, device and strides to the compiled kernel's own argument checks.
"""
import sys

import torch

from tilelang_tutorial import checks, host_cost, runtime
from tilelang_tutorial.lessons.mla import op as K
from tilelang_tutorial.lessons.mla.common import DIM_NOPE, DIM_PE
from tilelang_tutorial.lessons.mla.reference import make_paged_inputs
from tilelang_tutorial.lessons.tiles import row_sum as rs
from tilelang_tutorial.lessons.tiles import scale_copy as sc

m = runtime.mode()
print(runtime.describe_mode(), flush=True)
GPU = m.can_run
DEV = "cuda" if GPU else "cpu"     # without a GPU: parts 1 and 2 on CPU tensors (a dry run of the script)
KV_LEN = 8192 if GPU else 64

HOST = dict(calls=20000, repeats=7, sync=None)


def table(title, costs, bare=None):
    print(f"-- {title}", flush=True)
    host_cost.print_table(costs, bare=bare or "bare")


# 1. attribute reads (CUDA tensors on the GPU)
x = checks.random_tensor((2048, 4096), torch.float16, DEV)
kv = checks.random_tensor((128, 64, 1, 512), torch.float16, DEV)
table(f"host-only reads, one {DEV} tensor", host_cost.compare({
    "runtime.mode()": runtime.mode, "x.shape": lambda: x.shape, "x.dtype": lambda: x.dtype,
    "x.device": lambda: x.device, "x.is_contiguous()": lambda: x.is_contiguous(),
    "x.data_ptr()": lambda: x.data_ptr(), "kv.view(-1, 512)": lambda: kv.view(-1, 512),
    "hash((x.shape, x.dtype, x.device))": lambda: hash((x.shape, x.dtype, x.device)),
}, **HOST), bare="-")


# 2. the ops' Python, kernel call a no-op
def noop(*args):
    return None


y, s = torch.empty_like(x), torch.empty(2048, device=DEV)
sc.scale_copy(x, 0.5, out=y)
rs.row_sum(x, out=s)
for mod, fn in ((sc, sc.build_scale_copy), (rs, rs.build_row_sum)):
    for key in list(mod._FAST):
        mod._FAST[key] = (fn, noop)
costs = {"bare": lambda: noop(x, y, 0.5), "scale_copy(x, 0.5, out=y)": lambda: sc.scale_copy(x, 0.5, out=y),
         "row_sum(x, out=s)": lambda: rs.row_sum(x, out=s)}
inputs = {}
for b in (1, 64):
    inp = make_paged_inputs(b, 128, [KV_LEN] * b, dtype=torch.float16, device=DEV, seed=b, extra_pages=0)
    p = K.plan(**inp)
    out = torch.empty_like(p.out)
    inputs[b] = (inp, p, out)
    shadow = K.MLADecodePlan.__new__(K.MLADecodePlan)
    shadow.__dict__.update(p.__dict__, _launch=noop, _flat=[None, None])
    costs[f"plan.run(**x, out=out) b={b}"] = (lambda sp=shadow, i=inp, o=out: sp.run(**i, out=o))
table("the ops' Python, kernel call a no-op (host only)", host_cost.compare(costs, **HOST))
for mod in (sc, rs):
    mod._FAST.clear()
if not GPU:
    print("part 3 (real kernels, back to back) needs a CUDA GPU: not measured here")
    sys.exit(0)


# 3. real calls, back to back
def run_shapes_only(self, q_nope, q_pe, kv_cache, pe_cache, block_table, cache_seqlens, *, out=None):
    """plan.run with only the shapes compared in Python (the kernel checks dtype, device, strides)."""
    own = out is None
    if own:
        out = self.out
    if (q_nope.shape, q_pe.shape, kv_cache.shape, pe_cache.shape, block_table.shape,
            cache_seqlens.shape) != self._expected[:6] or not (own or out.shape == self._expected_out[0]):
        self._check(q_nope, q_pe, kv_cache, pe_cache, block_table, cache_seqlens, None if own else out)
    flat = self._flat
    kvf = flat[0]
    if kvf is None or kvf[0]() is not kv_cache or kvf[1] != kv_cache.data_ptr():
        kvf = (None, None, self._flat_view(0, kv_cache, DIM_NOPE))
    pef = flat[1]
    if pef is None or pef[0]() is not pe_cache or pef[1] != pe_cache.data_ptr():
        pef = (None, None, self._flat_view(1, pe_cache, DIM_PE))
    try:
        self._launch(q_nope, q_pe, kvf[2], pef[2], block_table, cache_seqlens, self.lse, self.o_partial, out)
    except Exception:
        self._check(q_nope, q_pe, kv_cache, pe_cache, block_table, cache_seqlens, None if own else out)
        raise
    return out


x1 = checks.random_tensor((1, 4096), torch.float16, "cuda")
y1, s1 = torch.empty_like(x1), torch.empty(1, device="cuda")
k_sc, k_rs = sc.build_scale_copy(4096, dtype="float16"), rs.build_row_sum(4096, dtype="float16")
table("scale_copy 1x4096, real kernel, back to back", host_cost.compare({
    "bare": lambda: k_sc(x1, y1, 0.5), "scale_copy(x, 0.5, out=y)": lambda: sc.scale_copy(x1, 0.5, out=y1)}))
table("row_sum 1x4096, real kernel, back to back", host_cost.compare({
    "bare": lambda: k_rs(x1, s1), "row_sum(x, out=s)": lambda: rs.row_sum(x1, out=s1)}))
for b, (inp, p, out) in inputs.items():
    args = (inp["q_nope"], inp["q_pe"], inp["kv_cache"].view(-1, DIM_NOPE), inp["pe_cache"].view(-1, DIM_PE),
            inp["block_table"], inp["cache_seqlens"], p.lse, p.o_partial, out)
    costs = host_cost.compare({
        "bare": lambda: p.kernel(*args),
        "plan.run(**x, out=out)": lambda: p.run(**inp, out=out),
        "variant: shapes only, kernel checks rest": lambda: run_shapes_only(p, **inp, out=out),
    }, calls=1000)
    costs["issue: bare (host only, no sync)"] = host_cost.issue_us(lambda: p.kernel(*args))
    costs["issue: plan.run (host only, no sync)"] = host_cost.issue_us(lambda: p.run(**inp, out=out))
    table(f"MLA b={b} kv=8192 h_q=128, real kernel, back to back", costs)
    ref_out = torch.empty_like(out)
    p.run(**inp, out=ref_out)
    run_shapes_only(p, **inp, out=out)
    torch.cuda.synchronize()
    print(f"   variant equals plan.run: {torch.equal(out, ref_out)}", flush=True)
# the variant's error for a bad dtype (the kernel's check, then the plan's one line)
inp, p, out = inputs[1]
try:
    run_shapes_only(p, **dict(inp, q_nope=inp["q_nope"].to(torch.bfloat16)), out=out)
except Exception as exc:
    print(f"   variant, q_nope in bf16: {type(exc).__name__}: {exc}  (from: {type(exc.__context__).__name__}: "
          f"{str(exc.__context__).splitlines()[0] if exc.__context__ else ''})", flush=True)
