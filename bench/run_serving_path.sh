#!/usr/bin/env bash
# The serving data path: what a client of dype-serve waits for beyond the model's own work. A GCN
# 128 -> 128 -> 16 (seeded, written by bench/peers/gnn_torch.py as a model repository entry) on
# Debian's package dependency graph (~68k nodes, ~300k edges):
#   in process  bench_model_inference: dype's CPU kernels called directly, median of REPS
#   receive     bench_grpc_receive: x taken out of gRPC's slices as dype-serve does, against
#               protobuf's generated parse and memcpy, in one process
#   gRPC        dype-client stream over one ModelStreamInfer stream to bare dype-serve (this host
#               detected), the graph registered once, one request in flight: the client's p50
#   gRPC unix   the same over dype-serve --grpc-socket (a Unix-domain socket, no TCP stack)
#   HTTP        the same over HTTP/1.1 keep-alive (the binary tensor extension)
#   gRPC shm, HTTP shm   the same with x and y in system shared-memory regions (dype-client --shm,
#               dype-serve --allow-client-shm): only the request's small header crosses the socket
# and the ratios in-process / client p50 (1.0: the wire, the daemon and the pipeline add nothing),
# held against the targets: shared memory p50 <= 1.2 x in-process + 2 ms; gRPC raw p50 (TCP and
# unix socket) <= 1.2 x in-process + two copies of x (a copy into a fresh buffer, measured in the
# same run); HTTP binary p50 <= 1.5 x gRPC raw. Beside them, the floor: x moved between two
# processes over bare TCP loopback and a bare Unix-domain socket (bench/socket_floor.py), so what a
# protocol adds can be told from what the kernel's socket copies cost on this machine; and y the
# same way, so the raw bound can be held against the floor under it (in-process + bare x + bare y +
# the copy out of gRPC's frames): where the floor is above the bound, no server meets it here.
# All figures are measured; client and daemon share this machine's cores.
#
#   bench/run_serving_path.sh [BUILD_DIR]        (default build/kernel-peers; needs
#                                                 bench_model_inference, dype-serve, dype-client)
#   Env: THREADS (2), REPS (5), REQUESTS (100 per protocol), GRAPH (default: the Debian
#        dependency graph, written to /tmp)
# Each figure is also one line "RESULT name=.. value=.. unit=.. kind=.. better=.. peer=.. target=.."
# (bench/run_all.sh collects them). Exits non-zero when a step fails.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/peer_env.sh
source "$root/bench/peer_env.sh"
peer_args build/kernel-peers 5 "$@"
requests=${REQUESTS:-100}
torch_python run_serving_path  # it writes the model
for b in bench/bench_model_inference bench/bench_grpc_receive apps/dype-serve apps/dype-client; do
  [[ -x "$build/$b" ]] || { echo "run_serving_path: $build/$b not built" >&2; exit 2; }
done
same_threads "$threads"

# shellcheck source=bench/serve_daemon.sh
source "$root/bench/serve_daemon.sh"
serve_workdir

echo "== serving data path: gcn 128 -> 128 -> 16 on $(basename "$graph"), $threads threads, $(uptime)"
# The model repository entry and features (one timing rep of the peer; its times are not used).
"$python" "$root/bench/peers/gnn_torch.py" "$graph" gcn "$work/repo" gcn 128 128 16 2 "$threads" 1 >/dev/null
# PyTorch's answer for the same weights and x checks the in-process run (it fails past 1e-4).
mv "$work/repo/gcn.torch.npy" "$work/gcn.torch.npy"
mv "$work/repo/x.npy" "$work/x.npy"

in_proc=$("$build/bench/bench_model_inference" --repo "$work/repo" --model gcn --graph "$graph" \
  --features "$work/x.npy" --expect "$work/gcn.torch.npy" --reps "$reps")
echo "  in process: $in_proc"
in_ms=$(sed -E 's/.*median_ms=([0-9.]+).*/\1/' <<<"$in_proc")
copy_ms=$(sed -E 's/.*x_memcpy_ms=([0-9.]+).*/\1/' <<<"$in_proc")
echo "RESULT name=gcn_in_process_ms value=$in_ms unit=ms kind=absolute better=lower peer=- target=-"
echo "RESULT name=gcn_x_memcpy_ms value=$copy_ms unit=ms kind=absolute better=lower peer=- target=-"
echo "RESULT name=gcn_in_process_rel_err_vs_torch value=$(sed -E 's/.*rel_err_vs_torch=([-0-9.e+]+).*/\1/' <<<"$in_proc")" \
     "unit=rel kind=absolute better=lower peer=torch target=1e-4"
x_bytes=$(sed -E 's/.*x_bytes=([0-9]+).*/\1/' <<<"$in_proc")
declare -A floor_x floor_y
while read -r transport floor; do
  echo "  x ($x_bytes bytes) over a bare $transport: $floor"
  ms=$(sed -E 's/.*median_ms=([0-9.e+-]+).*/\1/' <<<"$floor")
  floor_x[$transport]=$ms
  echo "RESULT name=gcn_x_${transport}_ms value=$ms unit=ms kind=absolute better=lower peer=- target=-"
done < <("$python" "$root/bench/socket_floor.py" "$x_bytes" 20)
# The answer back: y is 16 floats a node against x's 128, an eighth of x's bytes.
y_bytes=$((x_bytes / 8))
while read -r transport floor; do
  echo "  y ($y_bytes bytes) over a bare $transport: $floor"
  floor_y[$transport]=$(sed -E 's/.*median_ms=([0-9.e+-]+).*/\1/' <<<"$floor")
done < <("$python" "$root/bench/socket_floor.py" "$y_bytes" 20)
# The one copy the gRPC raw path keeps, taken apart in one process (bench_grpc_receive): x out of
# HTTP/2 frames into a receive buffer, checked, against protobuf's generated parse and memcpy.
receive=$("$build/bench/bench_grpc_receive" --reps 21)
sed 's/^/  /' <<<"$receive"
recv_ms=$(sed -n 's/^  dype  *\([0-9.]*\) ms.*/\1/p' <<<"$receive")
proto_ms=$(sed -n 's/^  protobuf  *\([0-9.]*\) ms.*/\1/p' <<<"$receive")
echo "RESULT name=gcn_grpc_receive_x_ms value=$recv_ms unit=ms kind=absolute better=lower peer=- target=-"
echo "RESULT name=gcn_grpc_receive_vs_protobuf value=$(awk -v a="$proto_ms" -v b="$recv_ms" 'BEGIN { printf "%.4g", a / b }')" \
     "unit=x kind=ratio better=higher peer=protobuf target=-"

start_daemon --allow-client-shm --grpc-socket "$work/grpc.sock"

status=0
declare -A p50_of
for protocol in grpc grpc_unix http grpc_shm http_shm; do
  log="$work/$protocol.log"
  shm=() via=()
  [[ $protocol == *_shm ]] && shm=(--shm)
  [[ $protocol == grpc_unix ]] && via=(--grpc-socket "$work/grpc.sock")
  if ! timeout 600 "$build/apps/dype-client" --protocol "${protocol%_*}" --http-port "$(port http)" \
      --grpc-port "$(port grpc)" --metrics-port "$(port metrics)" "${via[@]}" stream --model gcn --dir "$work/graphs" \
      --per-file "$requests" --requests "$requests" --concurrency 1 "${shm[@]}" >"$log" 2>&1; then
    sed 's/^/  client| /' "$log"
    echo "run_serving_path: the $protocol stream failed" >&2
    status=1
    continue
  fi
  summary=$(grep '^summary' "$log")
  echo "  $protocol: $summary"
  p50=$(sed -n 's/^summary.* p50 \([0-9.e+-]*\) ms.*/\1/p' <<<"$summary")
  p99=$(sed -n 's/^summary.* p99 \([0-9.e+-]*\) ms.*/\1/p' <<<"$summary")
  if [[ -z "$p50" ]]; then
    echo "run_serving_path: no p50 in the $protocol summary" >&2
    status=1
    continue
  fi
  echo "RESULT name=gcn_${protocol}_p50_ms value=$p50 unit=ms kind=absolute better=lower peer=- target=-"
  echo "RESULT name=gcn_${protocol}_p99_ms value=$p99 unit=ms kind=absolute better=lower peer=- target=-"
  p50_of[$protocol]=$p50
  r=$(awk -v a="$in_ms" -v b="$p50" 'BEGIN { printf "%.4g", a / b }')
  echo "  in process / $protocol client p50: ${r}x (measured)"
  echo "RESULT name=gcn_${protocol}_p50_vs_in_process value=$r unit=x kind=own_ratio better=higher" \
       "peer=in-process target=-"
done
# The targets, each as the ratio bound / p50 (>= 1: met), all figures from this run.
target() {  # name, p50, bound, what the bound is
  local r
  r=$(awk -v b="$3" -v p="$2" 'BEGIN { printf "%.4g", b / p }')
  local verdict=met
  awk -v r="$r" 'BEGIN { exit !(r < 1) }' && verdict=missed
  echo "  target $1: p50 $2 ms against $4 = $3 ms: $verdict (bound / p50 ${r}x)"
  echo "RESULT name=$1_target_margin value=$r unit=x kind=ratio better=higher peer=target target=1"
}
if [[ ${#p50_of[@]} -eq 5 ]]; then
  for p in grpc_shm http_shm; do
    target "gcn_${p}" "${p50_of[$p]}" "$(awk -v a="$in_ms" 'BEGIN { printf "%.4g", 1.2 * a + 2 }')" \
      "1.2 x in-process + 2 ms"
  done
  raw_bound=$(awk -v a="$in_ms" -v c="$copy_ms" 'BEGIN { printf "%.4g", 1.2 * a + 2 * c }')
  target gcn_grpc_raw "${p50_of[grpc]}" "$raw_bound" "1.2 x in-process + 2 x memcpy(x) (${copy_ms} ms)"
  target gcn_grpc_unix_raw "${p50_of[grpc_unix]}" "$raw_bound" "1.2 x in-process + 2 x memcpy(x) (${copy_ms} ms)"
  # Whether the raw bound can be met here at all: with one request in flight nothing overlaps the
  # engine (its first kernel gathers any row of x), so no server gets below the engine plus the
  # kernel's socket copies of x and y plus the one copy out of gRPC's frames (bench_grpc_receive).
  for p in grpc:tcp_loopback grpc_unix:unix_socket; do
    t=${p#*:}
    floor=$(awk -v e="$in_ms" -v x="${floor_x[$t]}" -v y="${floor_y[$t]}" -v c="$recv_ms" \
      'BEGIN { printf "%.4g", e + x + y + c }')
    r=$(awk -v b="$raw_bound" -v f="$floor" 'BEGIN { printf "%.4g", b / f }')
    verdict=reachable
    awk -v r="$r" 'BEGIN { exit !(r < 1) }' && verdict="out of reach on this machine"
    echo "  floor under ${p%%:*}: in-process $in_ms + bare $t x ${floor_x[$t]} + y ${floor_y[$t]}" \
         "+ the copy out of gRPC's frames $recv_ms = $floor ms against the bound $raw_bound ms: $verdict" \
         "(bound / floor ${r}x, measured)"
    echo "RESULT name=gcn_${p%%:*}_raw_floor_margin value=$r unit=x kind=ratio better=higher peer=floor target=-"
  done
  target gcn_http_binary "${p50_of[http]}" "$(awk -v g="${p50_of[grpc]}" 'BEGIN { printf "%.4g", 1.5 * g }')" \
    "1.5 x gRPC raw"
fi
echo "  dype-serve's plan: $(grep -m1 -i 'plan' "$work/serve.log" || echo unknown)"
exit $status
