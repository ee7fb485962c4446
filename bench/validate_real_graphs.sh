#!/usr/bin/env bash
# SpMM performance models against real graphs from Debian packages (measured on this machine):
# writes the Debian dependency graph, WordNet 3.0 and GCIDE as Matrix Market (installing
# wordnet-base and dict-gcide when missing), optionally profiles the CPU for PROFILE_S seconds (all
# kernels, as `dype-profile run` does by default), then runs `dype-profile validate` on each graph:
# measured time (median of 3 interleaved rounds) beside each model's prediction for N = 16..512,
# MAPE, and the MAPE left after 5 requests of online refinement (against a fresh measurement).
#
#   bench/validate_real_graphs.sh [MODEL.json ...]     (default: profile first, into $OUT/profile.json)
#   MEASURED=bench/results/h200-real-graphs bench/validate_real_graphs.sh configs/perfmodels/nvidia-h200.json
#
# With MEASURED=DIR the models are checked against times measured elsewhere, DIR/<graph>.csv
# (columns N,measured_ms), instead of timing here: no device, no profile.
# Environment: BUILD (default build/ci), OUT (default /tmp/dype-real-graphs), PROFILE_S (default 180),
# MEASURED (unset: time on this machine's CPU).
# Profile and validate on a quiet machine: other jobs inflate every measured time.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$root/build/ci}
[[ $build = /* ]] || build=$root/$build
out=${OUT:-/tmp/dype-real-graphs}
profile_s=${PROFILE_S:-180}
mkdir -p "$out"
need=()
[[ -f /usr/share/wordnet/data.noun ]] || need+=(wordnet-base)
[[ -f /usr/share/dictd/gcide.index ]] || need+=(dict-gcide)
if ((${#need[@]})); then
  apt-get update -qq && apt-get install -y -qq "${need[@]}" >/dev/null
fi
for g in debian-deps wordnet gcide; do
  [[ -s "$out/$g.mtx" ]] || /usr/bin/python3 "$root/apps/dype-profile/real_graphs.py" "$g" "$out/$g.mtx"
done
models=("$@")
if [[ -n ${MEASURED:-} ]]; then
  ((${#models[@]})) || { echo "MEASURED needs the model stores to check as arguments" >&2; exit 2; }
  args=()
  for g in debian-deps wordnet gcide; do args+=(--graph "$out/$g.mtx" --measured "$MEASURED/$g.csv"); done
  exec "$build/apps/dype-profile" validate "${models[@]}" "${args[@]}"
fi
if ((${#models[@]} == 0)); then
  "$build/apps/dype-profile" run --device cpu0 --budget "${profile_s}s" --out "$out/profile.json" --quiet |
    grep -E "profiled|feature set|held-out"
  models=("$out/profile.json")
fi
for g in debian-deps wordnet gcide; do
  echo
  "$build/apps/dype-profile" validate "${models[@]}" --graph "$out/$g.mtx"
done
