"""Nsight Compute profile of the default MLA decode schedule: one plan.run call, after warm-up,
between cudaProfilerStart/Stop (run under `ncu --profile-from-start off`).

    python3 mla_ncu.py BATCH SEQLEN [H_Q] [DTYPE]
"""
import sys

import torch

from tilelang_tutorial.lessons.mla import op, reference

batch, seqlen = int(sys.argv[1]), int(sys.argv[2])
h_q = int(sys.argv[3]) if len(sys.argv) > 3 else 128
dtype = {"float16": torch.float16, "bfloat16": torch.bfloat16}[sys.argv[4] if len(sys.argv) > 4 else "float16"]
x = reference.make_paged_inputs(batch, h_q, [seqlen] * batch, dtype=dtype, device="cuda", seed=1)
the_plan = op.plan(**x)
print(f"batch {batch} kv {seqlen} h_q {h_q} {dtype}: schedule {the_plan.schedule}, num_split {the_plan.num_split}")
for _ in range(3):
    out = the_plan.run(**x)
torch.cuda.synchronize()
ref = reference.mla_decode_reference(**x)
err = ((out.double() - ref.double()).norm() / ref.double().norm()).item()
print(f"rel error {err:.2e}")
torch.cuda.cudart().cudaProfilerStart()
the_plan.run(**x)
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStop()
