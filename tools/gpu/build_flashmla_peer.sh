#!/bin/bash
# On this machine (no GPU needed), from the project root: build .gpu/libflashmla_peer.so, FlashMLA's
# Hopper dense decode kernel with its scheduler and combine behind the C entry points of
# tilelang_tutorial/lessons/mla/flashmla_peer.cu, for sm_90a. The mla benchmark records FlashMLA as a
# peer when the library is there (the device tool carries .gpu/ with it).
#
#   bash tools/gpu/build_flashmla_peer.sh FLASHMLA_GIT CUTLASS_GIT [OUT]
#
# FLASHMLA_GIT, CUTLASS_GIT: git directories (clones, or the bare mirrors the fetch tool makes) of
# github.com/deepseek-ai/FlashMLA and github.com/NVIDIA/cutlass. FlashMLA is built at FLASHMLA_REV
# (default HEAD; known to build at 9241ae3), CUTLASS at the commit FlashMLA's tree pins as its submodule.
# The nvcc flags are FlashMLA's setup.py's (less -lineinfo and the ptxas warnings). No -lcuda (a
# machine without a GPU has no driver library): CUTLASS reaches the driver's cuTensorMapEncodeTiled
# through the CUDA runtime's entry-point lookup, which nvcc links statically.
set -euo pipefail
cd "$(dirname "$0")/../.."
FLASHMLA_GIT=$1; CUTLASS_GIT=$2; OUT=${3:-.gpu/libflashmla_peer.so}
rev=$(git -C "$FLASHMLA_GIT" rev-parse --short "${FLASHMLA_REV:-HEAD}")
cutlass_rev=$(git -C "$FLASHMLA_GIT" ls-tree "$rev" csrc/cutlass | awk '{print $3}')
SRC=$(mktemp -d); trap 'rm -rf "$SRC"' EXIT
git -C "$FLASHMLA_GIT" archive "$rev" csrc | tar x -C "$SRC"
mkdir -p "$SRC/cutlass"
for sub in include tools/util/include; do     # the subtrees only (a partial mirror lacks other blobs)
  git -C "$CUTLASS_GIT" archive --prefix="$sub/" "$cutlass_rev:$sub" | tar x -C "$SRC/cutlass"
done
F=$SRC/csrc
FLAGS=(-O3 -std=c++20 -DNDEBUG -D_USE_MATH_DEFINES -Wno-deprecated-declarations
       -U__CUDA_NO_HALF_OPERATORS__ -U__CUDA_NO_HALF_CONVERSIONS__ -U__CUDA_NO_HALF2_OPERATORS__
       -U__CUDA_NO_BFLOAT16_CONVERSIONS__ --expt-relaxed-constexpr --expt-extended-lambda --use_fast_math
       --ptxas-options=--register-usage-level=10 -gencode arch=compute_90a,code=sm_90a -Xcompiler -fPIC
       "-DFLASHMLA_PEER_SOURCES=\"FlashMLA $rev, CUTLASS ${cutlass_rev:0:8}\""
       -I "$F" -I "$F/kerutils/include" -I "$F/sm90" -I "$SRC/cutlass/include" -I "$SRC/cutlass/tools/util/include")
SOURCES=(tilelang_tutorial/lessons/mla/flashmla_peer.cu "$F/sm90/decode/dense/instantiations/fp16.cu"
         "$F/sm90/decode/dense/instantiations/bf16.cu" "$F/smxx/decode/combine/combine.cu"
         "$F/smxx/decode/get_decoding_sched_meta/get_decoding_sched_meta.cu")
pids=()
for i in "${!SOURCES[@]}"; do
  nvcc "${FLAGS[@]}" -c "${SOURCES[$i]}" -o "$SRC/$i.o" & pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
mkdir -p "$(dirname "$OUT")"
nvcc -shared -gencode arch=compute_90a,code=sm_90a "$SRC"/[0-9].o -o "$OUT"
ls -l "$OUT"
