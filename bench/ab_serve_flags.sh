#!/usr/bin/env bash
# A/B of two dype-serve configurations on the serving data path: two daemons, started with flags
# A and with flags B over the same model and graph, and one client alternating between them
# (A B, then B A, ...), so this shared machine's slow and fast phases fall on both sides alike.
# The workload is run_serving_path.sh's: a GCN 128 -> 128 -> 16 (bench/peers/gnn_torch.py) on
# Debian's package dependency graph, graph registered, 35 MB of features per request, one request
# in flight. Prints each round's client p50 per protocol and side, then each side's median over
# the rounds. All figures are measured; the two daemons and the client share this machine's cores
# (the idle daemon waits on its sockets).
#
#   bench/ab_serve_flags.sh "FLAGS A" "FLAGS B" [BUILD_DIR]    (default build/kernel-peers; needs
#                                                              dype-serve and dype-client)
#   e.g. bench/ab_serve_flags.sh "--receive-pool-mb 512" "--receive-pool-mb 0" build/ci
#   Env: ROUNDS (6), REQUESTS (30 per stream), PROTOCOLS ("grpc_unix http"; also grpc, grpc_shm,
#        http_shm), GRAPH (as run_serving_path.sh), SERVE_A / SERVE_B (the dype-serve binary of each
#        side, default BUILD_DIR's: an A/B of two builds, e.g. SERVE_B=/tmp/dype-serve-before "" "")
set -euo pipefail

[[ $# -ge 2 ]] || { sed -n '2,16p' "$0" >&2; exit 2; }
flags_a=$1 flags_b=$2
shift 2
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/peer_env.sh
source "$root/bench/peer_env.sh"
peer_args build/kernel-peers 1 "$@"
torch_python ab_serve_flags
for b in apps/dype-serve apps/dype-client; do
  [[ -x "$build/$b" ]] || { echo "ab_serve_flags: $build/$b not built" >&2; exit 2; }
done
rounds=${ROUNDS:-6} requests=${REQUESTS:-30}
read -r -a protocols <<<"${PROTOCOLS:-grpc_unix http}"
graph=${GRAPH:-/tmp/dype-debian-deps.mtx}
[[ -s "$graph" ]] || "$python" "$root/apps/dype-profile/real_graphs.py" debian-deps "$graph"

work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/repo" "$work/graphs"
ln -s "$(realpath "$graph")" "$work/graphs/$(basename "$graph")"
"$python" "$root/bench/peers/gnn_torch.py" "$graph" gcn "$work/repo" gcn 128 128 16 2 "$threads" 1 >/dev/null
rm -f "$work/repo/gcn.torch.npy"

echo "== A/B: A = ${SERVE_A:-dype-serve} $flags_a; B = ${SERVE_B:-dype-serve} $flags_b; $rounds rounds x ${protocols[*]}, $requests requests each, $(uptime)"
for side in A B; do
  mkdir -p "$work/$side"
  side_flags=$flags_a serve=${SERVE_A:-$build/apps/dype-serve}
  [[ $side == B ]] && side_flags=$flags_b serve=${SERVE_B:-$build/apps/dype-serve}
  # shellcheck disable=SC2086  # the flags are words
  "$serve" $side_flags --allow-client-shm --mode perf --model-repository "$work/repo" \
    --grpc-socket "$work/$side/grpc.sock" --http-port 0 --grpc-port 0 --metrics-port 0 \
    --port-file "$work/$side/ports.json" --exit-timeout 10 >"$work/$side/serve.log" 2>&1 &
  pids+=($!)
done
for side in A B; do
  for _ in $(seq 1 300); do
    [[ -s "$work/$side/ports.json" ]] && break
    sleep 0.2
  done
  [[ -s "$work/$side/ports.json" ]] || { sed 's/^/  serve| /' "$work/$side/serve.log"; echo "daemon $side did not start" >&2; exit 1; }
done
port() { sed -n "s/.*\"$2\": *\([0-9]*\).*/\1/p" "$work/$1/ports.json"; }

declare -A runs
for r in $(seq 1 "$rounds"); do
  order=(A B)
  ((r % 2 == 0)) && order=(B A)
  for side in "${order[@]}"; do
    for protocol in "${protocols[@]}"; do
      shm=() via=()
      [[ $protocol == *_shm ]] && shm=(--shm)
      [[ $protocol == grpc_unix ]] && via=(--grpc-socket "$work/$side/grpc.sock")
      log=$work/client.log
      if ! timeout 600 "$build/apps/dype-client" --protocol "${protocol%_*}" --http-port "$(port "$side" http)" \
          --grpc-port "$(port "$side" grpc)" --metrics-port "$(port "$side" metrics)" "${via[@]}" stream \
          --model gcn --dir "$work/graphs" --per-file "$requests" --requests "$requests" --concurrency 1 \
          "${shm[@]}" >"$log" 2>&1; then
        sed 's/^/  client| /' "$log"
        echo "ab_serve_flags: the $protocol stream to $side failed" >&2
        exit 1
      fi
      p50=$(sed -n 's/^summary.* p50 \([0-9.e+-]*\) ms.*/\1/p' "$log")
      [[ -n "$p50" ]] || { sed 's/^/  client| /' "$log"; echo "ab_serve_flags: no p50 in the $protocol summary" >&2; exit 1; }
      echo "  round $r $side $protocol: p50 $p50 ms"
      runs[$side.$protocol]+="$p50 "
    done
  done
done
median() { tr ' ' '\n' <<<"$1" | grep . | sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
for protocol in "${protocols[@]}"; do
  a=$(median "${runs[A.$protocol]}") b=$(median "${runs[B.$protocol]}")
  echo "  $protocol: median of the rounds' p50: A $a ms, B $b ms, B / A $(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.3f", b / a }') (measured)"
done
