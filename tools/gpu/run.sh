#!/bin/bash
# On a GPU machine, from anywhere (the device tool copies the working tree there, .gpu/ carried):
#
#   bash tools/gpu/run.sh STEP...
#
# STEP: smi | doctor | tests | render | bench:SUITE[:ARGS] | bench-stale ; each step's log goes to $OUT,
# one line per step (its exit status and seconds) to $OUT/steps.log. Knobs: TEST_PATHS (default: the
# whole suite), TEST_LIMIT (s, default 540), TEST_ARGS (more pytest arguments, split on spaces, e.g.
# '-m gpu'; an expression with spaces goes in PYTEST_ADDOPTS='-m "not gpu"'), RENDER_NAMES (default:
# every notebook), RENDER_LIMIT (s, default 500). `doctor` first on a fresh machine times it on a cold
# kernel cache (the README's figure).
set -u
cd "$(dirname "$0")/../.."
source .gpu/env.sh || { echo "no .gpu/ bundle: run tools/gpu/prepare.sh on a machine with network first"; exit 3; }
# FlashInfer, the mla benchmark's peer, where tools/gpu/build_flashinfer_peer.sh built it
if [ -f .gpu/flashinfer.tar.xz ] && [ ! -d /tmp/site/flashinfer ]; then
  tar -C /tmp/site -xJf .gpu/flashinfer.tar.xz || echo "FlashInfer not unpacked" >&2
fi
export TUTORIAL_PYTHON=python3 MPLBACKEND=Agg TILELANG_CACHE_DIR=${TILELANG_CACHE_DIR:-/tmp/tlcache}
# nbconvert's templates ('lab') are in the bundle's data folder, not on the default search path:
# without this, rendering fails after the notebook has executed
JUPYTER_PATH=$(ls -d /tmp/site/nbconvert-*.data/data/share/jupyter 2>/dev/null | head -1)
export JUPYTER_PATH
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
# the notebook tests compare notebooks with their committed copies: commit the tree as it arrived.
# The copy may come with no .git, or with one that holds an older commit than the working tree.
[ -d .git ] || git init -q
git add -A && git -c user.email=gpu@runner -c user.name=gpu commit -qm "working tree" --allow-empty \
  || echo "git snapshot failed" >> "$OUT/steps.log"
for step in "$@"; do
  t0=$(date +%s)
  case "$step" in
    smi) nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1 ;;
    doctor) ./tutorial doctor > "$OUT/doctor.log" 2>&1 ;;
    tests)
      # -v: every result is in the log as it happens, so a run stopped at its limit still names its
      # failures; SIGINT first, so pytest prints its summary before it stops. --dist loadscope as
      # ./tutorial test: loadfile would put all of test_exercises.py on one worker, the last to end
      timeout -s INT -k 20 "${TEST_LIMIT:-540}" python3 -m pytest -p no:cacheprovider -n 16 --dist loadscope \
        --no-loadscope-reorder --nbval-lax --nbval-current-env \
        -v --tb=short -rfE ${TEST_ARGS:-} ${TEST_PATHS:-tests tilelang_tutorial/lessons notebooks} > "$OUT/tests.log" 2>&1 ;;
    render)
      # stopped at its limit, the pages rendered so far still come back
      timeout -s INT -k 20 "${RENDER_LIMIT:-500}" python3 -m tilelang_tutorial render ${RENDER_NAMES:-} \
        > "$OUT/render.log" 2>&1
      rc=$?; tar cf "$OUT/rendered.tar" docs/rendered; (exit $rc) ;;
    bench:*)
      # a suite recorded: its log, and results/SUITE.json copied out (the run's record, to commit)
      spec=${step#bench:}; suite=${spec%%:*}; args=""; [ "$suite" != "$spec" ] && args=${spec#*:}
      python3 -m tilelang_tutorial bench "$suite" $args > "$OUT/bench_$suite.log" 2>&1
      # only a run that finished wrote a new record: after a failure the file is the committed one
      rc=$?; [ $rc -eq 0 ] && cp "results/$suite.json" "$OUT/" 2>/dev/null; (exit $rc) ;;
    bench-stale)
      # every suite whose records no longer fingerprint today's code, measured again; the records
      # it rewrote copied out (to commit)
      python3 -m tilelang_tutorial bench --stale > "$OUT/bench_stale.log" 2>&1
      rc=$?; git status --porcelain -- results | awk '{print $2}' | xargs -r cp -t "$OUT/"; (exit $rc) ;;
    *) echo "unknown step $step" >> "$OUT/steps.log"; continue ;;
  esac
  echo "$step rc=$? $(( $(date +%s) - t0 )) s" >> "$OUT/steps.log"
done
cat "$OUT/steps.log"
[ -f "$OUT/tests.log" ] && { grep -E '^(FAILED|ERROR) ' "$OUT/tests.log" | head -40; tail -3 "$OUT/tests.log"; }
[ -f "$OUT/render.log" ] && tail -5 "$OUT/render.log"
exit 0
