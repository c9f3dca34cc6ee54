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
    for arch in archs:
        runtime._validate_arch(arch)
        for entry in catalog.ENTRIES:
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
