"""One RMSNorm + SiLU launch (and a torch copy of the same bytes) between cudaProfilerStart/Stop.
    python3 rms_ncu.py C DTYPE M"""
import sys
import torch
from tilelang_tutorial import checks
from tilelang_tutorial.lessons.rmsnorm import kernel as rs

C, dt, M = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
tdt = getattr(torch, dt)
k = rs.build_rmsnorm_silu(C, dt, config=rs.config_for(C, dt))
x = checks.random_tensor((M, C), tdt, "cuda"); g = checks.random_tensor((C,), tdt, "cuda"); y = torch.empty_like(x)
for _ in range(3):
    k(x, g, y, 1e-5); y.copy_(x)
torch.cuda.synchronize()
print(f"C={C} {dt} M={M} config {rs.config_for(C, dt)}", flush=True)
torch.cuda.cudart().cudaProfilerStart()
k(x, g, y, 1e-5)
y.copy_(x)
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStop()
