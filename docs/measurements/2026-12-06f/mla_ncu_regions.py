"""Where the seesaw's warps spend their samples, by warpgroup and by step of the loop, from Nsight
Compute's per-instruction warp-state samples (``mla_seesaw_source_sass_h100.csv.xz``, written by
``../2026-12-06e/mla_ncu_source.py``: one ``plan.run`` at b64 kv 8192, fp16, h_q 128, the default
schedule, on an H100).

The SASS is cut where the code says so: the producer runs from ``USETMAXREG.DEALLOC`` to the first
``USETMAXREG.TRY_ALLOC``, each consumer warpgroup from one ``TRY_ALLOC`` to the next (warpgroup 1's
is the one with ``WARPGROUP.DEPBAR.LE gsb0, 0x1``: its ``T.wait_wgmma(1)``). Inside a consumer, the
steps of the loop (the instructions executed once per block pair) begin at its barrier waits
(``SYNCS.PHASECHK...TRYWAIT`` and the spin ``BRA`` after it), its ``wgmma`` groups (from their
``WARPGROUP.ARRIVE``; two groups in a row are one step) and its ``wgmma`` waits (``WARPGROUP.DEPBAR``); each step is named in the
order ``seesaw.py`` issues them, and the script stops if the SASS does not have that order.

    python3 mla_ncu_regions.py      # prints the table (mla_ncu_regions_h100.log)
    python3 mla_ncu_regions.py --waits mla_unserialized_source_sass_h100.csv.xz   # any kernel: each
        # warpgroup's waits in the loop (every TRYWAIT with its spin BRA, every WARPGROUP.DEPBAR) in
        # code order, with its share of that warpgroup's samples (mla_*_waits_h100.log)
"""
import csv, io, lzma, os, re, sys

HERE = os.path.dirname(os.path.abspath(__file__))

# the loop's steps in seesaw.py's order: (kind of anchor, name); kinds: wait (a TRYWAIT), qk / pv (a
# wgmma group of 64x64 / 64x256 products, from its WARPGROUP.ARRIVE), dep0 / dep1 (WARPGROUP.DEPBAR 0 / 1)
STEPS = {
    "warpgroup 0 (scores the even block, owns O[:, :256])": [
        ("wait", "wait full_l[0]: the even block's left half landed"),
        ("qk", "issue Q_l K_l^T"),
        ("wait", "wait full_r[0]: its right half and rotary keys landed"),
        ("qk", "issue Q_r K_r^T and Q_pe K_pe^T"),
        ("dep0", "wait for S (T.wait_wgmma(0)), then the softmax, P and the max published, O rescaled"),
        ("pv", "issue P0 V0_l"),
        ("dep0", "wait for P0 V0_l (T.gemm waits), free the even stage"),
        ("wait", "wait p_full[1]: warpgroup 1's P1 and max, then take the max, rescale O"),
        ("pv", "issue P1 V1_l"),
        ("dep0", "wait for P1 V1_l (T.gemm waits), free the odd stage; the loop's end"),
    ],
    "warpgroup 1 (scores the odd block, owns O[:, 256:])": [
        ("wait", "wait full_l[1]: the odd block's left half landed"),
        ("qk", "issue Q_l K_l^T"),
        ("wait", "wait full_r[1]: its right half and rotary keys landed"),
        ("qk", "issue Q_r K_r^T and Q_pe K_pe^T"),
        ("wait", "wait p_full[0]: warpgroup 0's P0 and max, then take the max, rescale O"),
        ("pv", "issue P0 V0_r"),
        ("dep1", "wait for S (T.wait_wgmma(1)), then the softmax, P and the max published"),
        ("dep0", "wait for P0 V0_r, free the even stage's right half, rescale O"),
        ("pv", "issue P1 V1_r"),
        ("dep0", "wait for P1 V1_r (T.gemm waits), free the odd stage's right half; the loop's end"),
    ],
}
PRODUCER_WAITS = ["wait empty_l[0]", "wait empty_r[0]", "wait empty_l[1]", "wait empty_r[1]"]


def load(path=os.path.join(HERE, "mla_seesaw_source_sass_h100.csv.xz")):
    rows = list(csv.reader(io.StringIO(lzma.open(path, "rt").read())))
    header, data = rows[1], [r for r in rows[2:] if len(r) >= len(rows[1])]
    col = {h: i for i, h in enumerate(header)}
    return [(r[col["Source"]].strip(), int(r[col["Warp Stall Sampling (All Samples)"]] or 0),
             int(r[col["Instructions Executed"]] or 0)) for r in data]


def anchors(code, loop_count):
    """(index, kind) of each step's first instruction in one consumer's code"""
    out, in_group = [], False
    for i, (src, _, n) in enumerate(code):
        if n != loop_count:
            continue
        if "TRYWAIT" in src:
            out.append((i, "wait"))
        elif src.startswith("WARPGROUP.ARRIVE"):
            j = next(k for k in range(i, len(code)) if "HGMMA" in code[k][0])
            kind = "qk" if "HGMMA.64x64x16" in code[j][0] else "pv"
            if not (out and out[-1][1] == kind):       # Q_r K_r^T and Q_pe K_pe^T: one step
                out.append((i, kind))
        elif src.startswith("WARPGROUP.DEPBAR"):
            out.append((i, "dep1" if src.endswith("0x1") else "dep0"))
    return out


def main():
    sass = load()
    total = sum(s for _, s, _ in sass)
    first = lambda pat, start=0: next(i for i in range(start, len(sass)) if re.search(pat, sass[i][0]))
    dealloc = first(r"USETMAXREG\.DEALLOC")
    alloc1 = first(r"USETMAXREG\.TRY_ALLOC")
    alloc2 = first(r"USETMAXREG\.TRY_ALLOC", alloc1 + 1)
    spins = first(r"NANOSLEEP", alloc2)            # the out-of-line retry loops of the waits
    spins = max(i for i in range(alloc2, spins) if sass[i][0].startswith("EXIT")) + 1
    parts = {"before the warpgroups split": (0, dealloc), "producer": (dealloc, alloc1),
             "consumer A": (alloc1, alloc2), "consumer B": (alloc2, spins), "wait retries (out of line)": (spins, len(sass))}
    print(f"{total} samples (every warp of the kernel, one sample per interval); by region:")
    for name, (a, b) in parts.items():
        s = sum(x[1] for x in sass[a:b])
        print(f"  {name:30s} {s:6d} {100 * s / total:5.1f} %")
    a, b = parts["producer"]
    code = sass[a:b]
    loop_count = max(n for src, _, n in code if "TRYWAIT" in src)
    waits = [i for i, (src, _, n) in enumerate(code) if "TRYWAIT" in src and n == loop_count]
    assert len(waits) == 4, waits
    ptotal = sum(x[1] for x in code)
    print(f"\nproducer: {ptotal} samples; its waits (TRYWAIT and the spin BRA after it), share of its samples:")
    for name, i in zip(PRODUCER_WAITS, waits):
        s = code[i][1] + code[i + 1][1]
        print(f"  {name:70s} {s:6d} {100 * s / ptotal:5.1f} %")
    for part in ("consumer A", "consumer B"):
        a, b = parts[part]
        code = sass[a:b]
        name = next(k for k in STEPS if ("warpgroup 1" in k) == any(src.startswith("WARPGROUP.DEPBAR") and src.endswith("0x1") for src, _, _ in code))
        loop_count = max(n for src, _, n in code if "HGMMA" in src)
        marks = anchors(code, loop_count)
        kinds = [k for _, k in marks]
        want = [k for k, _ in STEPS[name]]
        if kinds != want:
            sys.exit(f"{part}: the loop's steps are {kinds}, not seesaw.py's {want}")
        ctotal = sum(x[1] for x in code)
        print(f"\n{name} ({part}): {ctotal} samples, share of its samples:")
        s = sum(x[1] for x in code[:marks[0][0]])
        print(f"  {'before the loop: Q (q_full), the fills':70s} {s:6d} {100 * s / ctotal:5.1f} %")
        ends = [i for i, _ in marks[1:]] + [None]
        for (i, kind), end, (_, label) in zip(marks, ends, STEPS[name]):
            if end is None:       # the last step runs to the loop's last instruction
                end = max(j for j, (_, _, n) in enumerate(code) if n == loop_count) + 1
            s = sum(x[1] for x in code[i:end])
            own = code[i][1] + (code[i + 1][1] if kind == "wait" else 0)     # a TRYWAIT spins on the BRA after it
            spin = f"  (the wait itself {100 * own / ctotal:4.1f} %)" if kind in ("wait", "dep0", "dep1") else ""
            print(f"  {label:70s} {s:6d} {100 * s / ctotal:5.1f} %{spin}")
        s = sum(x[1] for x in code[end:])
        print(f"  {'after the loop: the denominators, the output stores':70s} {s:6d} {100 * s / ctotal:5.1f} %")


def waits(path):
    """each warpgroup's region (cut at USETMAXREG as above) and its waits, in code order"""
    sass = load(path)
    total = sum(s for _, s, _ in sass)
    cuts = [i for i, (src, _, _) in enumerate(sass) if src.startswith("USETMAXREG")]
    print(f"{os.path.basename(path)}: {total} samples")
    for a, b in zip(cuts, cuts[1:] + [len(sass)]):
        code = sass[a:b]
        own = sum(x[1] for x in code)
        role = ("producer" if "DEALLOC" in code[0][0] else
                "consumer with T.wait_wgmma(1)" if any(src.startswith("WARPGROUP.DEPBAR") and src.endswith("0x1") for src, _, _ in code)
                else "consumer")
        print(f"\n{role}: {own} samples ({100 * own / total:.1f} % of all); its waits, share of its samples:")
        for i, (src, s, n) in enumerate(code):
            if n and ("TRYWAIT" in src or src.startswith("WARPGROUP.DEPBAR")):
                w = s + (code[i + 1][1] if "TRYWAIT" in src else 0)
                if w:
                    print(f"  {i + a:5d} x{n:<7d} {w:6d} {100 * w / own:5.1f} %  {src}")


if __name__ == "__main__":
    if "--waits" in sys.argv:
        waits(os.path.join(HERE, sys.argv[sys.argv.index("--waits") + 1]))
    else:
        main()
