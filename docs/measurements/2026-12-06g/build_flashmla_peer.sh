#!/bin/bash
# Builds libflashmla_peer.so (FlashMLA's Hopper dense decode, its scheduler and combine kernels, and
# flashmla_peer.cu's C entry points) for sm_90a, here, without a GPU or torch.
#   FLASHMLA=<a checkout of github.com/deepseek-ai/FlashMLA at 9241ae3>
#   CUTLASS=<github.com/NVIDIA/cutlass at 147f5673, FlashMLA's submodule commit>
#   bash build_flashmla_peer.sh [OUTDIR]
# The flags are FlashMLA's setup.py's for nvcc (less -lineinfo and the ptxas warnings).
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
OUTDIR=${1:-$HERE}
: "${FLASHMLA:?set FLASHMLA}" "${CUTLASS:?set CUTLASS}"
FLAGS=(-O3 -std=c++20 -DNDEBUG -D_USE_MATH_DEFINES -Wno-deprecated-declarations
       -U__CUDA_NO_HALF_OPERATORS__ -U__CUDA_NO_HALF_CONVERSIONS__ -U__CUDA_NO_HALF2_OPERATORS__
       -U__CUDA_NO_BFLOAT16_CONVERSIONS__ --expt-relaxed-constexpr --expt-extended-lambda --use_fast_math
       --ptxas-options=--register-usage-level=10 -gencode arch=compute_90a,code=sm_90a
       -Xcompiler -fPIC -I "$FLASHMLA/csrc" -I "$FLASHMLA/csrc/kerutils/include" -I "$FLASHMLA/csrc/sm90"
       -I "$CUTLASS/include" -I "$CUTLASS/tools/util/include")
OBJ=$(mktemp -d); trap 'rm -rf "$OBJ"' EXIT
SOURCES=("$HERE/flashmla_peer.cu" "$FLASHMLA/csrc/sm90/decode/dense/instantiations/fp16.cu"
         "$FLASHMLA/csrc/sm90/decode/dense/instantiations/bf16.cu" "$FLASHMLA/csrc/smxx/decode/combine/combine.cu"
         "$FLASHMLA/csrc/smxx/decode/get_decoding_sched_meta/get_decoding_sched_meta.cu")
pids=()
for i in "${!SOURCES[@]}"; do
  nvcc "${FLAGS[@]}" -c "${SOURCES[$i]}" -o "$OBJ/$i.o" & pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
nvcc -shared -gencode arch=compute_90a,code=sm_90a "$OBJ"/*.o -o "$OUTDIR/libflashmla_peer.so"
# no -lcuda (this machine has no driver library): CUTLASS reaches the driver's cuTensorMapEncodeTiled
# through the CUDA runtime's entry-point lookup, linked statically by nvcc
ls -l "$OUTDIR/libflashmla_peer.so"
