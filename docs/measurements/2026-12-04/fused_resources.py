"""What the compiler made of the fused split-K kernel (gemm_fused_probe.gemm_relu_split_program)
against the pair's partial kernel (split_k.gemm_partial_program), for the configurations of
gemm_fused_probe.log. CPU only: every kernel is compiled for sm_90a, none is run.

    python fused_resources.py              # the tables (compiles once, then loads from the cache)
    python fused_resources.py --dump DIR   # also write each kernel's CUDA, PTX and SASS to DIR

Per kernel: registers/thread and spill bytes (tilelang_tutorial.inspector.resource_usage, i.e.
ptxas -v), named barriers (ptxas -v), setmaxnreg in the CUDA and the PTX, warp specialization
(the producer/consumer branch on threadIdx.x with warpgroup_reg_dealloc / _alloc), launch bounds,
dynamic shared memory, TMA load sites, then the K loops (CUDA text and the consumer loop's SASS
opcodes) compared between the two kernels, and how the fused epilogue's reads of W came out in
SASS: how many LDGs, how many predicated, and into how many distinct destination registers (one
register for all of them = each load waits for the previous one's add: one load in flight).

The fused kernel is built as gemm_fused_probe.build_fused builds it (its short A boxes where
M <= 64 on a 64-row tile), the partial as the probe's pair builds it (split_k.build_split_k, plain
partial program). SASS needs cuobjdump (on PATH, or the copy triton ships); without it those
columns read '-'. The last table compiles the fused program with ``guard_cols=True`` (its
epilogue test also bounds the column; measured later in ``gemm_fused_cols.py``), to see whether the
W loads then come out predicated.
"""
import collections
import difflib
import functools
import os
import re
import shutil
import subprocess
import sys
import tempfile

os.environ.setdefault("TILELANG_CACHE_DIR", "/tmp/tl_cache_helper")
here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
sys.path.insert(0, os.path.abspath(os.path.join(here, "..", "..", "..")))   # the repository root

import gemm_fused_probe as probe                                   # noqa: E402
from tilelang_tutorial import inspector, runtime                   # noqa: E402
from tilelang_tutorial.lessons.gemm import split_k                 # noqa: E402

ARCH = "sm_90a"
#: (M, N, K, dtype, tile name in probe.TILES, split, fused us, pair us): the rows of the brief, as
#: gemm_fused_probe.log reads them
CASES = [
    (183, 1248, 5024, "float16", "narrow", 4, 47.4, 18.8),
    (183, 1248, 5024, "float16", "m64n64k128s4", 2, 22.3, 17.7),
    (228, 2336, 5672, "float16", "m128n128k128t256", 3, 48.1, 27.7),
    (781, 1464, 4144, "bfloat16", "tuned", 2, 64.7, 34.5),
    (637, 3616, 7856, "float16", "tuned", 2, 142.1, 104.6),
    (260, 1280, 7800, "float16", "m128n128k128t256", 3, 33.0, 29.3),
    (1, 2048, 8192, "float16", "m64n64k128s4", 4, 18.9, 20.7),
    (16, 8192, 8192, "float16", "m64n128k64s4", 2, 47.6, 49.8),
    (64, 2048, 8192, "float16", "m64n64k128s4", 4, 20.2, 21.7),
]
#: three more rows of the same log, to cross-check: one shape (145 x 960) with a tile that divides
#: N and one that does not, and a 256-thread tile that divides N (260 x 1280, tuned)
EXTRA = [
    (145, 960, 4480, "float16", "m64n64k128s4", 2, 15.3, 15.6),
    (145, 960, 4480, "float16", "narrow", 3, 37.8, 17.3),
    (260, 1280, 7800, "float16", "tuned", 4, 41.6, 32.9),
]
#: the K-loop diffs the brief asks for: a slow case and a fast one
VARIANT_CASES = [CASES[2], CASES[0], CASES[3]]
DIFF_CASES = [(228, 2336, 5672, "float16", "m128n128k128t256", 3), (64, 2048, 8192, "float16", "m64n64k128s4", 4)]


def knobs(name):
    cfg = probe.TILES[name]
    return {k: getattr(cfg, k) for k in probe.KNOBS}


@functools.lru_cache(maxsize=None)
def build(case):
    """(a_rows, fused kernel, partial kernel, reduce kernel) for one configuration."""
    M, N, K, dt, name, split = case[:6]
    a_rows = probe.short(M, probe.TILES[name])
    fused = runtime.compile_kernel(probe.gemm_relu_split_program(N, K, split, in_dtype=dt, a_rows=a_rows,
                                                                 **knobs(name)), arch=ARCH)
    partial, reduce = split_k.build_split_k(N, K, split, probe.TILES[name], dt, arch=ARCH)
    return a_rows, fused, partial, reduce


@functools.lru_cache(maxsize=None)
def build_variant(case):
    M, N, K, dt, name, split = case[:6]
    return runtime.compile_kernel(probe.gemm_relu_split_program(N, K, split, in_dtype=dt, guard_cols=True, **knobs(name)), arch=ARCH)


# ------------------------------------------------------------------------------------------------
# facts read off the CUDA, the PTX and the SASS
# ------------------------------------------------------------------------------------------------

def _cuobjdump():
    found = shutil.which("cuobjdump")
    if found:
        return found
    try:
        import triton
        path = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
        return path if os.path.exists(path) else None
    except ImportError:
        return None


def ptxas_and_sass(ptx):
    """(named barriers from ptxas -v, SASS instructions or None)."""
    ptxas = shutil.which("ptxas") or (runtime.nvcc_path() or "").replace("nvcc", "ptxas")
    with tempfile.TemporaryDirectory() as d:
        p, cubin = os.path.join(d, "k.ptx"), os.path.join(d, "k.cubin")
        with open(p, "w") as f:
            f.write(ptx)
        proc = subprocess.run([ptxas, f"-arch={ARCH}", "-v", p, "-o", cubin], capture_output=True, text=True)
        m = re.search(r"used (\d+) barriers", proc.stderr)
        barriers = int(m.group(1)) if m else None
        tool = _cuobjdump()
        if tool is None:
            return barriers, None
        out = subprocess.run([tool, "-sass", cubin], capture_output=True, text=True).stdout
    sass = [m.group(1) for line in out.splitlines() if (m := re.match(r"\s+/\*[0-9a-f]{4}\*/\s+(.*?)\s*;", line))]
    return barriers, sass


def cuda_loops(src):
    """The text of every ``for (int ko...`` loop (the producer's and the consumer's K loops)."""
    loops = []
    for mt in re.finditer(r"for \(int ko\w* = ", src):
        depth, j = 0, src.index("{", mt.start())
        while True:
            depth += {"{": 1, "}": -1}.get(src[j], 0)
            if depth == 0:
                break
            j += 1
        loops.append(src[mt.start():j + 1])
    return loops


#: the opcodes that make a K loop's structure (MMA, its waits, barriers, memory, branches); the others
#: are integer arithmetic and moves, where two compiles of the same loop may pick other forms
STRUCTURAL = ("HGMMA", "WARPGROUP", "SYNCS", "BAR", "LDG", "STG", "LDS", "STS", "UTMA", "MEMBAR", "ATOM", "CCTL",
              "BRA", "R2UR", "USETMAXREG", "FENCE")


def opcode(instr):
    return re.sub(r"^@!?U?P\w+\s+", "", instr).split()[0]


def consumer_loop_sass(sass):
    """The consumer warpgroup's K loop: from its setmaxnreg (USETMAXREG.TRY_ALLOC) to the first
    arrive on an empty barrier after it (SYNCS.ARRIVE), the end of the loop body."""
    start = next(i for i, s in enumerate(sass) if s.startswith("USETMAXREG.TRY_ALLOC"))
    end = next(i for i in range(start, len(sass)) if sass[i].startswith("SYNCS.ARRIVE"))
    return sass[start:end + 1]


def epilogue_loads(sass):
    """The fused kernel's reads of W after the count: LDG.E after the ATOM, in the consumer code."""
    a = next(i for i, s in enumerate(sass) if "ATOM" in s)
    loads = [s for s in sass[a:] if re.search(r"\bLDG\.E", s)]
    dests = {re.search(r"LDG\.E\S*\s+(R\d+)", s).group(1) for s in loads}
    return {"ldg": len(loads), "predicated": sum(s.startswith("@") for s in loads), "dest_regs": len(dests),
            "width": sorted({re.search(r"LDG\.(\S+)", s).group(1) for s in loads}),
            "membar": [s for s in sass if s.startswith("MEMBAR")], "cctl": [s for s in sass if s.startswith("CCTL")]}


def facts(kernel):
    src = inspector.kernel_source(kernel)
    ptx = inspector.kernel_ptx(kernel)
    usage = next(iter(inspector.resource_usage(kernel).values()), {})
    launch = inspector.launch_facts(kernel)
    barriers, sass = ptxas_and_sass(ptx)
    nreg_src = re.findall(r"warpgroup_reg_(alloc|dealloc)<(\d+)>", src)
    nreg_ptx = re.findall(r"setmaxnreg\.(inc|dec)\.sync\.aligned\.u32 (\d+)", ptx)
    f = {
        "regs": usage.get("registers"), "spill": f"{usage.get('spill_stores')}/{usage.get('spill_loads')}",
        "barriers": barriers,
        "nreg_src": "+".join(f"{k}<{v}>" for k, v in dict.fromkeys(nreg_src)) or "none",
        "nreg_ptx": "+".join(f"{k} {v}" for k, v in dict.fromkeys(nreg_ptx)) or "none",
        "ws": bool(re.search(r"if \(\(\(int\)threadIdx\.x\) (<|>=) \d+\)", src)) and bool(nreg_src),
        "bounds": re.search(r"__launch_bounds__\(([^)]*)\)", src).group(1).replace(" ", ""),
        "smem": "+".join(launch["dynamic_shared_bytes"]) or "0",
        "tma": len(re.findall(r"tl::tma_load\(", src)),
        "cp_async": len(re.findall(r"cp_async", src)),
        "loops": cuda_loops(src), "src": src, "ptx": ptx, "sass": sass,
    }
    if sass:
        loop = consumer_loop_sass(sass)
        ops = collections.Counter(opcode(s) for s in loop)
        f["loop_ops"] = collections.Counter({k: v for k, v in ops.items() if k.startswith(STRUCTURAL)})
        f["hgmma"] = sum(v for k, v in ops.items() if k.startswith("HGMMA"))
        f["loop_len"] = len(loop)
    return f


def main(argv):
    dump = argv[argv.index("--dump") + 1] if "--dump" in argv else None
    have_sass = _cuobjdump() is not None
    for case in CASES + EXTRA:
        build(case)
    if have_sass:
        for case in VARIANT_CASES:
            build_variant(case)
    print("| config [fused / pair us, log] | kernel | regs/thr | spill st/ld B | named barriers | setmaxnreg (CUDA) "
          "| setmaxnreg (PTX) | warp-specialized | launch bounds | dyn smem B | tma_load sites |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    details = []
    for case in CASES + EXTRA:
        M, N, K, dt, name, split, t_f, t_p = case
        a_rows, fused, partial, reduce = build(case)
        cfg = probe.TILES[name]
        label = (f"{M}x{N}x{K} {'bf16' if dt == 'bfloat16' else 'fp16'} {name} k{split}"
                 + (f", fused A boxes {a_rows} rows" if a_rows else "") + ("" if case in CASES else " (extra)"))
        ff, fp = facts(fused), facts(partial)
        for kind, f, t in (("fused", ff, t_f), ("partial", fp, t_p)):
            print(f"| {label} [{t}] | {kind} | {f['regs']} | {f['spill']} | {f['barriers']} | {f['nreg_src']} | "
                  f"{f['nreg_ptx']} | {'yes' if f['ws'] else 'no'} | {f['bounds']} | {f['smem']} | {f['tma']} |")
        same_cuda = [a == b for a, b in zip(ff["loops"], fp["loops"])]
        d = {"label": label, "N%bn": N % cfg.block_N, "cuda_loops_same": same_cuda,
             "cp_async": (ff["cp_async"], fp["cp_async"])}
        if have_sass:
            d.update(sass_loop_same=ff["loop_ops"] == fp["loop_ops"], hgmma=(ff["hgmma"], fp["hgmma"]),
                     loop_len=(ff["loop_len"], fp["loop_len"]), w=epilogue_loads(ff["sass"]))
        details.append((t_f, t_p, split, cfg, d))
        if dump:
            os.makedirs(dump, exist_ok=True)
            tag = f"{M}x{N}x{K}_{name}_k{split}"
            for kind, f in (("fused", ff), ("partial", fp)):
                for ext, text in (("cu", f["src"]), ("ptx", f["ptx"]), ("sass", "\n".join(f["sass"] or []))):
                    with open(os.path.join(dump, f"{tag}.{kind}.{ext}"), "w") as fh:
                        fh.write(text)
            with open(os.path.join(dump, f"{tag}.reduce.cu"), "w") as fh:
                fh.write(inspector.kernel_source(reduce))

    print("\nK loops and the fused epilogue's reads of W (SASS after the atomic):\n")
    print("| config | N % block_N | CUDA K loops identical (producer, consumer) | consumer loop SASS: instructions "
          "fused/partial, non-ALU opcodes identical | HGMMA per iteration | W loads in SASS | predicated | distinct dest regs | serial W loads/thread "
          "| (fused - pair) / serial loads |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for t_f, t_p, split, cfg, d in details:
        if not have_sass:
            print(f"| {d['label']} | {d['N%bn']} | {d['cuda_loops_same']} | - | - | - | - | - | - | - |")
            continue
        w = d["w"]
        per_thread = split * cfg.block_M * cfg.block_N // cfg.threads // 2     # float2 reads per thread
        serial = per_thread if w["dest_regs"] == 1 else 0
        ratio = f"{(t_f - t_p) / serial:.2f} us" if serial else "-"
        print(f"| {d['label']} | {d['N%bn']} | {d['cuda_loops_same']} | {d['loop_len'][0]}/{d['loop_len'][1]}, "
              f"{'yes' if d['sass_loop_same'] else 'NO'} | {d['hgmma'][0]}/{d['hgmma'][1]} | {w['ldg']} {'/'.join(w['width'])} | {w['predicated']} | "
              f"{w['dest_regs']} | {serial or 'none'} | {ratio} |")
    if have_sass:
        w = details[0][4]["w"]
        print(f"\nfused kernels, around the count: {sorted(set(w['membar']))} and {sorted(set(w['cctl']))} "
              f"(the acq_rel atomic); the partial kernels have neither")

    print("\nK loops, fused vs partial CUDA (unified diff of the ko loops; empty = identical):")
    for case in DIFF_CASES:
        _, fused, partial, _ = build(case)
        a, b = cuda_loops(inspector.kernel_source(partial)), cuda_loops(inspector.kernel_source(fused))
        diff = list(difflib.unified_diff("\n".join(a).splitlines(), "\n".join(b).splitlines(), "partial", "fused",
                                         lineterm=""))
        print(f"  {case[0]}x{case[1]}x{case[2]} {case[4]} k{case[5]}: {len(a)} loops each, "
              f"{sum(x.count(chr(10)) + 1 for x in a)} lines; diff: {len(diff)} lines")
        for line in diff:
            print("    " + line)

    if have_sass:
        print("\nThe variant whose read-back test also bounds the column (compile only, never run):\n")
        print("| config | regs/thr | spill | W loads in SASS | predicated | distinct dest regs |")
        print("|---|---|---|---|---|---|")
        for case in VARIANT_CASES:
            f = facts(build_variant(case))
            w = epilogue_loads(f["sass"])
            print(f"| {case[0]}x{case[1]}x{case[2]} {case[4]} k{case[5]} | {f['regs']} | {f['spill']} | {w['ldg']} "
                  f"{'/'.join(w['width'])} | {w['predicated']} | {w['dest_regs']} |")


if __name__ == "__main__":
    main(sys.argv[1:])
