"""Precompile the candidates of the missed RMSNorm widths in 16 processes, then run the sweep."""
import sys, time
sys.path.insert(0, __file__.rsplit("/", 1)[0])
from tilelang_tutorial import runtime
from tilelang_tutorial.lessons.rmsnorm import kernel as rs, sweep

WIDTHS = (32, 64, 2592, 5152, 5216, 6176, 6400, 6688, 7008, 7328)


def job(j):
    C, dt, i = j
    rs.build_rmsnorm_silu(C, dt, config=sweep.candidates(C)[i])


if __name__ == "__main__":
    t0 = time.time()
    jobs = [(C, dt, i) for C in WIDTHS for dt in sweep.DTYPES for i in range(len(sweep.candidates(C)))]
    got = runtime.precompile(jobs, "rms_sweep:job")
    print(f"precompiled {sum(e is None for e in got.values())} of {len(got)} in {time.time() - t0:.0f} s", flush=True)
    sys.exit(sweep.main([str(C) for C in WIDTHS] + ["--budget=200"]))
