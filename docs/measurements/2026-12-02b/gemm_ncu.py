"""The op's GEMM + ReLU and torch's a @ b, one launch each, between cudaProfilerStart/Stop.
    python3 gemm_ncu.py M N K"""
import sys
import torch
from tilelang_tutorial import checks
from tilelang_tutorial.lessons.gemm import kernel as gr, rule

M, N, K = map(int, sys.argv[1:4])
a = checks.random_tensor((M, K), torch.float16, "cuda"); b = checks.random_tensor((K, N), torch.float16, "cuda")
out = torch.empty(M, N, dtype=torch.float16, device="cuda")
print(f"{M}x{N}x{K}: rule {rule.choose(M, N, K, 'float16').label}", flush=True)
for _ in range(3):
    gr.gemm_relu(a, b, out=out); a @ b
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStart()
gr.gemm_relu(a, b, out=out)
a @ b
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStop()
