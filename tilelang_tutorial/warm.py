"""``python -m tilelang_tutorial warm-cache``: compile the notebooks' kernels into the TileLang cache.

For a workshop: run it once on each machine (or on one, and copy ``$TILELANG_CACHE_DIR``) before
the room arrives, so nobody waits for nvcc during the session.
"""
import time

from . import catalog, runtime


def _build_one(label: str, build, arch: str) -> bool:
    """Compile one kernel into the cache and say how long it took; False if it failed."""
    t0 = time.time()
    try:
        build(arch)
    except Exception as exc:
        print(f"[FAIL] {label} for {arch}: {type(exc).__name__}: {exc}", flush=True)
        return False
    print(f"[ok  ] {label} for {arch} in {time.time() - t0:.1f} s", flush=True)
    return True


def warm(archs=()) -> int:
    archs = list(archs) or [runtime.current_arch()]
    for arch in archs:
        runtime._validate_arch(arch)
    failures = 0
    t_all = time.time()
    # 1. What the notebooks compile on their CPU path (pinned architectures as the notebooks pin them).
    seen = set()
    for nbk in catalog.NOTEBOOK_BUILDS:
        for arch in ([nbk.arch] if nbk.arch else archs):
            if (nbk.name, arch) not in seen:
                seen.add((nbk.name, arch))
                failures += not _build_one(f"notebook {nbk.notebook}: {nbk.name}", nbk.build, arch)
    # 2. Every tutorial kernel for each requested architecture it is written for.
    for arch in archs:
        for entry in catalog.ENTRIES:
            if arch not in entry.archs:
                print(f"[skip] {entry.name} for {arch}: written for {', '.join(entry.archs)}", flush=True)
            elif (entry.name, arch) not in seen:
                failures += not _build_one(entry.name, entry.build, arch)
    print(f"warm-cache: {'done' if not failures else f'{failures} failed'} in {time.time() - t_all:.0f} s")
    return 1 if failures else 0
