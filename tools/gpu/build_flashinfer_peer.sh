#!/bin/bash
# On this machine (network, nvcc; no GPU needed), from the project root: build .gpu/flashinfer.tar.xz,
# FlashInfer with its Hopper MLA decode (backend "fa3") compiled ahead of time for sm_90a in fp16
# and bf16, so that the mla benchmark records FlashInfer as a peer on the offline GPU runner
# (tools/gpu/run.sh unpacks it beside the bundle). About 5 MB packed: it fits one call with .gpu/.
#
#   bash tools/gpu/build_flashinfer_peer.sh [PYTHON]      (default .venv/bin/python: ./tutorial setup)
#
# Why each step: the runner can neither download nor JIT-compile in the time of a call, so the two
# modules FlashInferMLA loads are compiled here and put where FlashInfer looks for ahead-of-time
# builds (flashinfer/data/aot/NAME/NAME.so), which it loads without compiling. They are linked by
# nvcc, whose static CUDA runtime needs no libcuda stub here. The package is then cut to what its
# import and the MLA path load (the 62 MB wheel is mostly CUDA sources and kernels of other ops).
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${1:-.venv/bin/python}
VERSION=0.7.2.post1
WORK=$(mktemp -d); trap 'rm -rf "$WORK"' EXIT
# flashinfer-python and the pure-Python packages its import needs that torch and the bundle lack
"$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 -d "$WORK/wheels" \
  "flashinfer-python==$VERSION" nvidia-ml-py einops click tabulate
"$PY" -m pip install -q --no-deps --no-compile --target "$WORK/site" "$WORK"/wheels/*.whl
FI=$WORK/site/flashinfer
export PYTHONPATH=$WORK/site FLASHINFER_CUDA_ARCH_LIST=9.0a FLASHINFER_WORKSPACE_BASE=$WORK/jit
# the build directory of each module, its sources generated and its ninja file written
"$PY" - "$WORK/dirs" <<'EOF'
import sys, torch
from flashinfer.jit.attention import gen_batch_mla_module
with open(sys.argv[1], "w") as out:
    for dt in (torch.float16, torch.bfloat16):      # the lesson's dtypes; int32 page ids, as FlashInferMLA plans
        spec = gen_batch_mla_module("fa3", dt, dt, dt, torch.int32, 512, 64, False)
        spec.write_ninja()
        print(spec.name, spec.build_dir, file=out)
EOF
while read -r name dir; do
  objs=$(ninja -C "$dir" -t targets all | grep -o '^[^:]*\.o' | sort -u)
  ninja -C "$dir" $objs > "$WORK/ninja.log" 2>&1 || { tail -20 "$WORK/ninja.log"; exit 1; }
  mkdir -p "$FI/data/aot/$name"
  (cd "$dir" && nvcc -shared -Xcompiler -fPIC $objs -o "$FI/data/aot/$name/$name.so")
done < "$WORK/dirs"
# what the import and the MLA path load; every other file of the packages that are mostly other ops goes
"$PY" - "$WORK/used" <<'EOF'
import sys, torch
import flashinfer
from flashinfer.mla import BatchMLAPagedAttentionWrapper
from flashinfer.mla._batch_mla._backends._fa_common import get_batch_mla_module
for dt in (torch.float16, torch.bfloat16):
    get_batch_mla_module("fa3", dt, dt, dt, torch.int32, 512, 64, False)   # the ahead-of-time modules load
with open(sys.argv[1], "w") as out:
    print("\n".join(sorted(m.__file__ for m in list(sys.modules.values()) if getattr(m, "__file__", None))), file=out)
EOF
keep_csrc=$(cd "$FI/data/csrc" && ls batch_mla_config.jinja batch_mla_sm90_*.cu)   # the spec still renders them
mkdir "$WORK/csrc" && (cd "$FI/data/csrc" && cp $keep_csrc "$WORK/csrc/")
rm -rf "$FI/data/csrc" "$FI/data/cutlass" "$FI/data/cccl" "$FI/data/spdlog" "$FI/data/include" "$FI/moe_ep"
mv "$WORK/csrc" "$FI/data/csrc"
for pkg in experimental cute_dsl gdn_kernels; do
  find "$FI/$pkg" -type f | while read -r f; do grep -qxF "$f" "$WORK/used" || rm "$f"; done
  find "$FI/$pkg" -type d -empty -delete
done
find "$WORK/site" -name __pycache__ -prune -exec rm -rf {} +
rm -rf "$WORK/site/bin"
mkdir -p .gpu && tar -C "$WORK/site" -cJf .gpu/flashinfer.tar.xz .
echo ".gpu/flashinfer.tar.xz: $(du -m .gpu/flashinfer.tar.xz | cut -f1) MB (FlashInfer $VERSION, MLA fa3 for sm_90a, fp16 and bf16)"
