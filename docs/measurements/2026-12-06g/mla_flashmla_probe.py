"""Goal 4 probe: FlashMLA's own Hopper decode kernel (built from its source by
``build_flashmla_peer.sh`` into ``libflashmla_peer.so``, called through ``flashmla_peer.cu``'s C
entry points) beside the package's default (``plan.run``, the split the package picks) on the same
card, at the goal's points and the mid and ragged batches. The 620 TFLOP/s goal reads FlashMLA's
published 660 on an H800; this measures what FlashMLA does here.

FlashMLA is called as its users call it: its scheduler once per batch of lengths (``get_mla_metadata``),
then each step the kernel and its combine (``flash_mla_with_kvcache``), on the cache laid out as it
wants it (``[pages, 64, 1, 576]``: the package's two caches concatenated, the same numbers). Each is
checked against the fp32 reference (16 sequences) on a poisoned output first, then timed in three
interleaved rounds: do_bench's median with the L2 flushed, checked by CUDA events around a loop of
(flush, call) minus the flushes (timing.measure_or_note). Printed: TFLOP/s per round, the median,
and FlashMLA / package.

    python3 mla_flashmla_probe.py [--so PATH]     # on a GPU
"""
import ctypes, os, random, statistics, sys, time

HERE = os.path.dirname(os.path.abspath(__file__))
from tilelang_tutorial import checks, timing   # noqa: E402
from tilelang_tutorial.lessons.mla import bench, op   # noqa: E402
from tilelang_tutorial.lessons.mla.common import default_softmax_scale   # noqa: E402

POINTS = [  # label, batch, kv length (the longest when ragged), ragged, dtype
    ("b64 kv 4096", 64, 4096, False, "float16"), ("b64 kv 8192", 64, 8192, False, "float16"),
    ("b64 kv 16384", 64, 16384, False, "float16"), ("b128 kv 4096", 128, 4096, False, "float16"),
    ("b128 kv 8192", 128, 8192, False, "float16"), ("b64 kv 8192 bf16", 64, 8192, False, "bfloat16"),
    ("b8 kv 20000", 8, 20000, False, "float16"), ("b4 kv 32768", 4, 32768, False, "float16"),
    ("ragged b48 <= 16255", 48, 16255, True, "float16"), ("b1 kv 32768", 1, 32768, False, "float16"),
]


class FlashMLA:
    """FlashMLA's decode on the package's inputs ``x``: scheduled once, ``run()`` per step"""

    def __init__(self, lib, x):
        import torch

        self.lib, dev = lib, "cuda"
        q = torch.cat([x["q_nope"], x["q_pe"]], dim=-1).contiguous()             # [b, h_q, 576]
        self.kcache = torch.cat([x["kv_cache"], x["pe_cache"]], dim=-1).contiguous()  # [pages, 64, 1, 576]
        b, h_q, _ = q.shape
        self.q, self.bt, self.lens = q, x["block_table"].contiguous(), x["cache_seqlens"].contiguous()
        self.parts = lib.flashmla_num_sm_parts(torch.cuda.get_device_properties(0).multi_processor_count, h_q)
        self.meta = torch.empty(self.parts, lib.flashmla_sched_meta_ints(), dtype=torch.int32, device=dev)
        self.splits = torch.empty(b + 1, dtype=torch.int32, device=dev)
        self.out = checks.poisoned((b, h_q, 512), q.dtype, dev)
        self.lse = torch.empty(b, h_q, dtype=torch.float32, device=dev)
        self.lse_acc = torch.empty(b + self.parts, h_q, dtype=torch.float32, device=dev)
        self.o_acc = torch.empty(b + self.parts, h_q, 512, dtype=torch.float32, device=dev)
        self.bf16 = int(q.dtype == torch.bfloat16)
        self.args = (self.bf16, b, h_q, self.kcache.shape[0], self.bt.shape[1], ctypes.c_float(default_softmax_scale()),
                     *(ctypes.c_void_p(t.data_ptr()) for t in (self.q, self.kcache, self.bt, self.lens, self.meta, self.splits)),
                     self.parts, *(ctypes.c_void_p(t.data_ptr()) for t in (self.out, self.lse, self.lse_acc, self.o_acc)))
        rc = lib.flashmla_schedule(b, ctypes.c_void_p(self.lens.data_ptr()), ctypes.c_void_p(self.meta.data_ptr()),
                                   ctypes.c_void_p(self.splits.data_ptr()), self.parts, self._stream())
        assert rc == 0, f"flashmla_schedule returned {rc}"

    @staticmethod
    def _stream():
        import torch
        return ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)

    def run(self):
        rc = self.lib.flashmla_decode(*self.args, self._stream())
        if rc:
            raise RuntimeError(f"flashmla_decode returned {rc}")


def load_library():
    """``libflashmla_peer.so`` (``--so PATH``, else the one beside this script), argument types set"""
    so = sys.argv[sys.argv.index("--so") + 1] if "--so" in sys.argv else os.path.join(HERE, "libflashmla_peer.so")
    lib = ctypes.CDLL(so)
    lib.flashmla_decode.argtypes = [ctypes.c_int] * 5 + [ctypes.c_float] + [ctypes.c_void_p] * 6 + [ctypes.c_int] \
        + [ctypes.c_void_p] * 5
    return lib


def both_at(lib, label, b, h_q, seqlens, dtype, seed):
    """The package's plan (its own split) and FlashMLA on one batch of fresh inputs: prints the point's
    line; returns ({name: call}, {name: its output, poisoned}, reference rows, fp32 reference)"""
    x = bench._inputs(b, h_q, seqlens, dtype, seed=seed)
    idx, ref = bench._reference(x)
    the_plan = op.plan(**x)
    out = checks.poisoned(tuple(x["q_nope"].shape), x["q_nope"].dtype, "cuda")
    fm = FlashMLA(lib, x)
    print(f"== {label}: b={b} mean kv {sum(seqlens) / b:.0f} package num_split={the_plan.num_split} "
          f"flashmla parts={fm.parts}", flush=True)
    return ({"package": lambda: the_plan.run(**x, out=out), "flashmla": fm.run},
            {"package": out, "flashmla": fm.out}, idx, ref)


def check_and_time(runs, outs, idx, ref, dtype, rate, fmt="4.0f", unit="TFLOP/s"):
    """Each of ``runs`` (name -> call) checked against the reference on its output (``outs``), then
    the correct ones timed in three interleaved rounds (the order rotated each round); prints each
    round's ``rate(ms)`` and the median, then ``flashmla / package``; returns {name: median rate}"""
    import torch

    ok = {}
    for name, fn in runs.items():
        fn()
        torch.cuda.synchronize()
        ok[name] = bench._check(outs[name], idx, ref, dtype)
        print(f"  {name:9s} rel {ok[name]['rel_error']:.1e} unwritten {ok[name]['unwritten']} "
              f"{'ok' if ok[name]['ok'] else 'WRONG'}", flush=True)
    got = {name: [] for name in runs if ok[name]["ok"]}
    names = list(got)
    for rnd in range(3):
        for name in names[rnd % len(names):] + names[:rnd % len(names)]:
            t, why = timing.measure_or_note(runs[name])
            got[name].append(None if t is None else rate(t.ms))
    med = {}
    for name in names:
        vals = [v for v in got[name] if v is not None]
        med[name] = statistics.median(vals) if vals else float("nan")
        print(f"  {name:9s} rounds " + " ".join("refused" if v is None else f"{v:{fmt}}" for v in got[name])
              + f" | median {med[name]:{fmt}} {unit}", flush=True)
    if len(med) == 2:
        print(f"  flashmla / package {med['flashmla'] / med['package']:.3f}", flush=True)
    return med


def main():
    import torch

    lib = load_library()
    t0 = time.time()
    print(torch.cuda.get_device_name(), flush=True)
    for pi, (label, b, kv, ragged, dtype) in enumerate(POINTS):
        rng = random.Random(pi)
        seqlens = [rng.randint(1, kv) for _ in range(b)] if ragged else [kv] * b
        flops = bench._flops(128, seqlens)
        runs, outs, idx, ref = both_at(lib, label, b, 128, seqlens, dtype, seed=700 + pi)
        check_and_time(runs, outs, idx, ref, dtype, lambda ms: flops / ms / 1e9)
        del runs, outs, ref
        torch.cuda.empty_cache()
    print(f"mla_flashmla_probe done in {time.time() - t0:.0f} s", flush=True)


if __name__ == "__main__":
    main()
