"""``python -m tilelang_tutorial warm-cache``: compile the notebooks' kernels into the TileLang cache.

For a workshop: run it once on each machine (or on one, and copy ``$TILELANG_CACHE_DIR``) before
the room arrives, so nobody waits for nvcc during the session.
"""
import time

from . import catalog, runtime


def warm(archs=()) -> int:
    archs = list(archs) or [runtime.current_arch()]
    failures = 0
    t_all = time.time()
    # 1. What the notebooks compile on their CPU path (pinned architectures as the notebooks pin them).
    seen = set()
    for nbk in catalog.NOTEBOOK_BUILDS:
        for arch in ([nbk.arch] if nbk.arch else archs):
            runtime._validate_arch(arch)
            if (nbk.name, arch) in seen:
                continue
            seen.add((nbk.name, arch))
            t0 = time.time()
            try:
                nbk.build(arch)
                print(f"[ok  ] notebook {nbk.notebook}: {nbk.name} for {arch} in {time.time() - t0:.1f} s", flush=True)
            except Exception as exc:
                failures += 1
                print(f"[FAIL] notebook {nbk.notebook}: {nbk.name} for {arch}: {type(exc).__name__}: {exc}", flush=True)
    # 2. Every tutorial kernel for each requested architecture it is written for.
    for arch in archs:
        runtime._validate_arch(arch)
        for entry in catalog.ENTRIES:
            if (entry.name, arch) in seen:
                continue
            if arch not in entry.archs:
                print(f"[skip] {entry.name} for {arch}: written for {', '.join(entry.archs)}", flush=True)
                continue
            t0 = time.time()
            try:
                entry.build(arch)
                print(f"[ok  ] {entry.name} for {arch} in {time.time() - t0:.1f} s", flush=True)
            except Exception as exc:
                failures += 1
                print(f"[FAIL] {entry.name} for {arch}: {type(exc).__name__}: {exc}", flush=True)
    print(f"warm-cache: {'done' if not failures else f'{failures} failed'} in {time.time() - t_all:.0f} s")
    return 1 if failures else 0
