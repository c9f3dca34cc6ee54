#!/bin/bash
# On the GPU runner, from the project root (the device tool copies the working tree there, .gpu/ carried):
#
#   bash docs/measurements/runner/run.sh STEP...
#
# STEP: require:GPU | smi | next-rule | tests | render | bench:SUITE[:ARGS] | probe:DIR/SCRIPT[:ARGS] ; each step's log goes to $OUT, one line per
# step (its exit status and seconds) to $OUT/steps.log. Knobs: TEST_PATHS (default: the whole suite),
# TEST_LIMIT (s, default 540), TEST_ARGS (more pytest arguments, split on spaces, e.g. '-m gpu'; an expression with spaces goes in PYTEST_ADDOPTS='-m "not gpu"'), RENDER_NAMES (default: every notebook), PROBE_LIMIT (s, default 300).
set -u
cd "$(dirname "$0")/../../.."
source .gpu/env.sh || { echo "no .gpu/ bundle: run docs/measurements/runner/prepare.sh here first"; exit 3; }
export TUTORIAL_PYTHON=python3 MPLBACKEND=Agg TILELANG_CACHE_DIR=${TILELANG_CACHE_DIR:-/tmp/tlcache}
# nbconvert's templates ('lab') are in the bundle's data folder, not on the default search path:
# without this, rendering fails after the notebook has executed
JUPYTER_PATH=$(ls -d /tmp/site/nbconvert-*.data/data/share/jupyter 2>/dev/null | head -1)
export JUPYTER_PATH
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
# the notebook tests compare notebooks with their committed copies: the copy the tool makes has no .git
if [ ! -d .git ]; then
  git init -q && git add -A && git -c user.email=gpu@runner -c user.name=gpu commit -qm "working tree" \
    || echo "git snapshot failed" >> "$OUT/steps.log"
fi
for step in "$@"; do
  t0=$(date +%s)
  case "$step" in
    require:*)
      # a call that must run on one kind of card (a record of the H200's) stops here on another:
      # the device tool may give an H100 for a call that names an H200
      gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>&1 | head -1)
      if [[ "$gpu" != *"${step#require:}"* ]]; then
        echo "$step: this is $gpu; no step after this one ran" >> "$OUT/steps.log"; break
      fi ;;
    smi) nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1 ;;
    next-rule)
      # the GEMM rule's pending changes (rule.NEXT_RULE) on in this copy, for the steps after it: the
      # gemm_rule record that turns them on in the repository is made with them
      sed -i 's/^NEXT_RULE = False$/NEXT_RULE = True/' tilelang_tutorial/lessons/gemm/rule.py
      grep -q '^NEXT_RULE = True$' tilelang_tutorial/lessons/gemm/rule.py ;;
    tests)
      # -v: every result is in the log as it happens, so a run stopped at its limit still names its
      # failures; SIGINT first, so pytest prints its summary before it stops
      timeout -s INT -k 20 "${TEST_LIMIT:-540}" python3 -m pytest -p no:cacheprovider -n 16 --dist loadfile \
        -v --tb=short -rfE ${TEST_ARGS:-} ${TEST_PATHS:-tests tilelang_tutorial/lessons notebooks} > "$OUT/tests.log" 2>&1 ;;
    render)
      python3 -m tilelang_tutorial render ${RENDER_NAMES:-} > "$OUT/render.log" 2>&1
      tar cf "$OUT/rendered.tar" docs/rendered ;;
    bench:*)
      # a suite recorded: its log, and results/SUITE.json copied out (the run's record, to commit)
      spec=${step#bench:}; suite=${spec%%:*}; args=""; [ "$suite" != "$spec" ] && args=${spec#*:}
      python3 -m tilelang_tutorial bench "$suite" $args > "$OUT/bench_$suite.log" 2>&1
      # only a run that finished wrote a new record: after a failure the file is the committed one
      rc=$?; [ $rc -eq 0 ] && cp "results/$suite.json" "$OUT/" 2>/dev/null; (exit $rc) ;;
    probe:*)
      spec=${step#probe:}; script=${spec%%:*}; args=""; [ "$script" != "$spec" ] && args=${spec#*:}
      name=$(basename "$script" .py); [ -n "$args" ] && name="${name}_${args// /_}"    # one log per step
      name=${name//:/_}         # the device tool does not bring back a file whose name holds a colon
      (cd "$(dirname "$script")" && timeout -s INT "${PROBE_LIMIT:-300}" python3 "$(basename "$script")" $args) \
        > "$OUT/$name.log" 2>&1 ;;
    *) echo "unknown step $step" >> "$OUT/steps.log"; continue ;;
  esac
  echo "$step rc=$? $(( $(date +%s) - t0 )) s" >> "$OUT/steps.log"
done
cat "$OUT/steps.log"
[ -f "$OUT/tests.log" ] && { grep -E '^(FAILED|ERROR) ' "$OUT/tests.log" | head -40; tail -3 "$OUT/tests.log"; }
[ -f "$OUT/render.log" ] && tail -5 "$OUT/render.log"
exit 0
