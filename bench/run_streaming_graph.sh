#!/usr/bin/env bash
# Streaming graphs through dype-serve: one GCN 128 -> 128 -> 16 (seeded, written by
# bench/peers/gnn_torch.py as a model repository entry) over Debian's package dependency graph
# (~68k nodes, ~300k edges), one client stream, against the whole-graph request it replaces:
#   whole graph     dype-client stream over the graph registered once, x sent with each request,
#                   the whole answer (today's way to follow a changing graph): the client's p50
#   one edge        dype-client stream --updates: the graph registered with its features, one
#                   random edge added per update, then the answer for the nodes it changed
#                   (node_ids): p50 of update + answer
#   batched edges   the same with BATCH single-edge changes in each update, each followed by the
#                   answer for the nodes they changed: changes/s
# and the ratios, held against the targets: whole / one edge >= 50; batched >= 5000 changes/s;
# and one edge against the peer, PyTorch recomputing the whole graph (its fastest rep, in process).
# Also the in-process figures (bench_incremental: the same work without the protocol).
# All figures are measured on this machine; client and daemon share its cores.
#
#   bench/run_streaming_graph.sh [BUILD_DIR]     (default build/release; needs dype-serve,
#                                                 dype-client, bench_incremental)
#   Env: UPDATES (300), BATCH (1000), BATCHES (20), REQUESTS (30 whole-graph requests),
#        PROTOCOL (grpc), GRAPH (default: the Debian dependency graph, written to /tmp)
# Each figure is also one line "RESULT name=.. value=.. unit=.. kind=.. better=.. peer=.. target=.."
# (bench/run_all.sh collects them). Exits non-zero when a step fails.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build/release}
updates=${UPDATES:-300}
batch=${BATCH:-1000}
batches=${BATCHES:-20}
requests=${REQUESTS:-30}
protocol=${PROTOCOL:-grpc}
python=/usr/bin/python3
"$python" -c "import torch, numpy" 2>/dev/null ||
  { echo "run_streaming_graph: python3-torch missing (it writes the model; scripts/setup.sh)" >&2; exit 3; }
for b in apps/dype-serve apps/dype-client bench/bench_incremental; do
  [[ -x "$build/$b" ]] || { echo "run_streaming_graph: $build/$b not built" >&2; exit 2; }
done
# shellcheck source=bench/serve_daemon.sh
source "$root/bench/serve_daemon.sh"
serve_workdir

echo "== streaming graph: gcn 128 -> 128 -> 16 on $(basename "$graph"), $protocol, $(uptime)"
# The model's weights, and the peer: PyTorch recomputing the whole graph (its fastest CSR forward of 5).
torch_out=$("$python" "$root/bench/peers/gnn_torch.py" "$graph" gcn "$work/repo" gcn 128 128 16 2 2 5)
torch_recompute=$(grep "torch gcn csr" <<<"$torch_out" | sed -E 's/.*min_ms=([0-9.]+).*/\1/')
echo "  peer: $(grep "torch gcn csr" <<<"$torch_out")"
rm -f "$work/repo/gcn.torch.npy" "$work/repo/x.npy"

in_proc=$("$build/bench/bench_incremental" --graph "$graph" --updates "$updates" --batch 2000)
sed 's/^/  in process| /' <<<"$in_proc"
grep '^RESULT' <<<"$in_proc" | sed 's/name=incremental_/name=in_process_incremental_/'

start_daemon
client() {
  timeout 900 "$build/apps/dype-client" --protocol "$protocol" --http-port "$(port http)" --grpc-port "$(port grpc)" \
    --metrics-port "$(port metrics)" stream --model gcn "$@"
}

client --dir "$work/graphs" --per-file "$requests" --requests "$requests" --concurrency 1 >"$work/whole.log" 2>&1 ||
  { sed 's/^/  client| /' "$work/whole.log"; exit 1; }
whole=$(sed -n 's/^summary.* p50 \([0-9.e+-]*\) ms.*/\1/p' "$work/whole.log")
echo "  whole graph: $(grep '^summary' "$work/whole.log")"

client --updates drift --update-drift 0:1 --requests "$updates" --graph "$graph" >"$work/one.log" 2>&1 ||
  { sed 's/^/  client| /' "$work/one.log"; exit 1; }
one=$(sed -n 's/^summary.*update + answer p50 \([0-9.e+-]*\) ms.*/\1/p' "$work/one.log")
echo "  one edge: $(grep '^summary' "$work/one.log")"

client --updates drift --update-drift "0:$batch" --requests "$batches" --graph "$graph" >"$work/batch.log" 2>&1 ||
  { sed 's/^/  client| /' "$work/batch.log"; exit 1; }
rate=$(sed -n 's/^summary.* \([0-9.e+-]*\) changes\/s.*/\1/p' "$work/batch.log")
echo "  batched ($batch edges an update): $(grep '^summary' "$work/batch.log")"

speedup=$(awk -v w="$whole" -v o="$one" 'BEGIN { printf "%.4g", w / o }')
vs_torch=$(awk -v t="$torch_recompute" -v o="$one" 'BEGIN { printf "%.4g", t / o }')
echo "RESULT name=streaming_whole_graph_p50_ms value=$whole unit=ms kind=absolute better=lower peer=- target=-"
echo "RESULT name=streaming_one_edge_p50_ms value=$one unit=ms kind=absolute better=lower peer=- target=-"
# Against dype's own whole-graph request: it moves when either path does, so it answers to its
# target; the ratio against PyTorch recomputing the graph is the one compared across runs.
echo "RESULT name=streaming_one_edge_speedup value=$speedup unit=x kind=own_ratio better=higher peer=whole_graph target=50"
# Its own tolerance: one edge's p50 (0.4-0.6 ms) is bound by thread wake-ups over loopback, which
# move with the VM's load, the peer (about 100 ms) by compute: five measurements on two commits
# that leave its path alone spread 177-223x.
echo "RESULT name=streaming_one_edge_vs_torch_recompute value=$vs_torch unit=x kind=ratio better=higher peer=torch-csr-fastest target=- tolerance=0.3"
echo "RESULT name=streaming_batched_changes_per_s value=$rate unit=changes/s kind=absolute better=higher peer=- target=5000"
verdict() { awk -v v="$1" -v t="$2" 'BEGIN { exit !(v >= t) }' && echo met || echo missed; }
echo "  target one edge + answer >= 50x faster than a whole-graph request: ${speedup}x, $(verdict "$speedup" 50)"
echo "  one edge + answer against PyTorch recomputing the whole graph in process (${torch_recompute} ms): ${vs_torch}x (measured)"
echo "  target batched single-edge changes >= 5000/s with answers: ${rate}/s, $(verdict "$rate" 5000)"
