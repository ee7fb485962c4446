#!/usr/bin/env bash
# CPU inference of a whole transformer encoder, dype vs PyTorch 1.13's nn.TransformerEncoder with
# the sliding window as a band mask, on the same weights, token embeddings and thread count
# (measured, medians of REPS). For post-norm and pre-norm: both times, the ratio (target dype >=
# 3x PyTorch) and dype's answer checked against PyTorch's (1e-4 relative).
#
#   bench/run_transformer_peers.sh [BUILD_DIR]        (default build/kernel-peers)
#   Env: THREADS (2), REPS (5), SEQ (4096), WINDOW (256), D_MODEL (512), HEADS (8), FFN (2048),
#        LAYERS (2), NO_BUILD=1 (use BUILD_DIR's binaries as they are)
# Besides the prose, each ratio and answer check is one "RESULT name=.. value=.. ..." line
# (bench/run_all.sh collects them).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/peer_env.sh
source "$root/bench/peer_env.sh"
peer_args build/kernel-peers 5 "$@"
seq=${SEQ:-4096}
window=${WINDOW:-256}
d=${D_MODEL:-512}
heads=${HEADS:-8}
ffn=${FFN:-2048}
layers=${LAYERS:-2}
torch_python run_transformer_peers
build_model_bench "$build"
same_threads "$threads"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
status=0
for norm_first in 0 1; do
  name=$([[ $norm_first == 1 ]] && echo pre-norm || echo post-norm)
  echo "== transformer $name: d_model $d, $heads heads, ffn $ffn, $layers layers, seq_len $seq, window $window, $threads threads"
  torch_out=$(GLIBC_TUNABLES=$tunables "$python" "$root/bench/peers/transformer_torch.py" "$work" "$name" "$d" "$heads" "$ffn" "$layers" \
    "$seq" "$window" "$norm_first" "$threads" "$reps")
  echo "  ${torch_out//$'\n'/$'\n'  }"
  dype_out=$("$build/bench/bench_model_inference" --repo "$work" --model "$name" --tokens "$work/x.npy" \
    --window "$window" --expect "$work/$name.torch.npy" --reps "$reps") || status=1
  echo "  $dype_out"
  d_ms=$(sed -E 's/.*median_ms=([0-9.]+).*/\1/' <<<"$dype_out")
  t_ms=$(grep "band-mask" <<<"$torch_out" | sed -E 's/.*median_ms=([0-9.]+).*/\1/')
  ratio=$(awk -v a="$t_ms" -v b="$d_ms" 'BEGIN { printf "%.2f", a / b }')
  verdict=$(awk -v r="$ratio" 'BEGIN { print (r >= 3.0) ? "met" : "MISSED" }')
  echo "  dype / torch: ${ratio}x (target >= 3x: $verdict)"
  err=$(sed -E 's/.*rel_err_vs_torch=([-0-9.e+]+).*/\1/' <<<"$dype_out")
  echo "RESULT name=transformer_${name}_seq${seq}_ms value=$d_ms unit=ms kind=absolute better=lower peer=- target=-"
  echo "RESULT name=transformer_${name}_seq${seq}_rel_err_vs_torch value=$err unit=rel kind=absolute better=lower" \
       "peer=torch target=1e-4"
  echo "RESULT name=transformer_${name}_seq${seq}_vs_torch value=$(awk -v a="$t_ms" -v b="$d_ms" 'BEGIN { printf "%.4g", a / b }')" \
       "unit=x kind=ratio better=higher peer=torch-band-mask target=3"
  [[ $verdict == met ]] || status=1
done
exit $status
