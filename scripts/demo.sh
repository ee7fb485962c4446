#!/usr/bin/env bash
# The main job on a fresh Debian 12 machine: set up, build dype-serve and dype-client, start the
# daemon in balanced mode on the emulated DyPe paper testbed, stream a drifting GNN workload through
# it with dype-client while an operator drains a GPU and swaps an FPGA's bitstream mid-stream (the
# plan changes; drift re-plans are recorded with their causes), print the re-plans, and stop the
# daemon with SIGTERM (in-flight requests finish, exit status 0).
#
#   bash scripts/demo.sh                      # everything
#   DYPE_BUILD_DIR=build/dev bash scripts/demo.sh   # reuse an existing build, skip set-up
#
# Device times and energy come from emulated MI210/U280 models (modelled); latencies and
# throughput printed by the client are measured on this machine.
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ -z "${DYPE_BUILD_DIR:-}" ]]; then
  bash scripts/setup.sh
  cmake --preset release >/dev/null
  cmake --build --preset release -j "$(nproc)" --target dype-serve dype-client
  DYPE_BUILD_DIR=build/release
fi
bin="$DYPE_BUILD_DIR/apps"
work=$(mktemp -d)
pid=""
cleanup() {
  if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; then kill -TERM "$pid"; wait "$pid" || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$work/token"
echo "== starting dype-serve --mode balanced on configs/systems/paper-testbed-pcie4.yaml, serving the"
echo "   example repository (models/: GCN, GIN and GraphSAGE trained on the karate club) and the built-in seeded models"
"$bin/dype-serve" --system configs/systems/paper-testbed-pcie4.yaml --mode balanced \
  --model-repository models --builtin-models \
  --http-port 0 --grpc-port 0 --metrics-port 0 --port-file "$work/ports.json" \
  --admin-token-file "$work/token" --bitstream-dir configs/bitstreams > "$work/serve.log" 2>&1 &
pid=$!
for _ in $(seq 1 600); do
  [[ -s "$work/ports.json" ]] && break
  kill -0 "$pid" 2>/dev/null || { cat "$work/serve.log"; echo "dype-serve exited early" >&2; exit 1; }
  sleep 0.2
done
[[ -s "$work/ports.json" ]] || { cat "$work/serve.log"; echo "dype-serve did not start" >&2; exit 1; }
port() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$work/ports.json" "$1"; }
http=$(port http)
metrics=$(port metrics)
client=("$bin/dype-client" --http-port "$http" --metrics-port "$metrics")
admin=("${client[@]}" admin --token-file "$work/token")
sed 's/^/  serve| /' "$work/serve.log"
echo "== status page (plan, devices, re-plans, Pareto front, drift; updates every second while the demo runs):"
echo "   http://127.0.0.1:$http/ui/"

# Pretty-printers for the admin API's JSON answers.
cat > "$work/show.py" <<'PY'
import json, sys
what, j = sys.argv[1], json.load(sys.stdin)
if "error" in j:
    print("   error:", j["error"])
elif what == "plan":
    p = j["plans"][0]
    print(f"  gcn plan epoch {p['epoch']}: {p['label']}  [{p['pipeline']}]  (mode {p['mode']})")
elif what == "replans":
    for r in j["plans"][0]["replans"]:
        if r["cause"] == "initial":
            continue
        sw = "swapped" if r["swapped"] else "kept (not better)"
        print(f"  at request {r['at_request']:>4}  {r['cause']:<9} {r['old_plan']:>8} -> {r['new_plan']:<8} {sw}; {r['detail']}")
elif what == "drift-replans":
    for r in j["plans"][0]["replans"]:
        if r["cause"] != "drift" or not r["swapped"]:
            continue
        # null: the old plan breaks the mode's constraint (balanced: below 70% of the best throughput)
        gain = ("n/a, the old plan breaks the mode's constraint" if r["predicted_gain"] is None
                else f"{r['predicted_gain'] * 100:+.0f}%")
        print(f"  at request {r['at_request']:>4}  {r['old_plan']:>7} -> {r['new_plan']:<7} predicted gain {gain}; {r['detail']}")
elif what == "drain":
    print(f"   {j['device']}: drained={j['drained']}, plans {j['plans']}")
elif what == "load":
    print(f"   fpga0: {j['previous']} -> {j['bitstream']}, load {j['load_time_s']:.3g} s ({j['load_time_source']}), "
          f"swap took {j['swap_s'] * 1e3:.1f} ms ({j['swap_source']}), plans {j['plans']}")
PY
plans() { "${admin[@]}" --model gcn plan | python3 "$work/show.py" plan; }

echo "== karate-gcn (trained in PyTorch) on Zachary's karate club: dype's answers against the labels"
"${client[@]}" infer --model karate-gcn --graph models/karate/karate.mtx --features models/karate/features.npy \
  --out "$work/karate.npy" --top-k 0
python3 - "$work/karate.npy" <<'PY'
import json, struct, sys
# The .npy written by dype-client: a 128-byte v1 header, then float32 [34, 2].
raw = open(sys.argv[1], "rb").read()
hlen = struct.unpack("<H", raw[8:10])[0]
vals = struct.unpack("<68f", raw[10 + hlen:])
pred = [0 if vals[2 * i] >= vals[2 * i + 1] else 1 for i in range(34)]
labels = [int(l) for l in open("models/karate/labels.txt")]
split = [l.strip() for l in open("models/karate/split.txt")]
ref = json.load(open("models/karate/reference.json"))["models"]["karate-gcn"]
test = [i for i in range(34) if split[i] == "test"]
acc = sum(pred[i] == labels[i] for i in test) / len(test)
print(f"  held-out accuracy {acc:.3f} through dype; PyTorch {ref['accuracy_test']:.3f};"
      f" predictions identical to PyTorch's: {pred == ref['predictions']}")
PY
echo "== plan before the stream"
plans

# Drift schedule: small graphs, then 10x larger ones, then small again. Meanwhile the operator
# drains gpu0 (the plan moves off it), swaps fpga0's bitstream, and lets gpu0 back in.
echo "== streaming 400 gcn requests (4 concurrent, 25/s) with a drift schedule; admin changes mid-stream"
( sleep 4
  echo "-- admin: drain gpu0"
  "${admin[@]}" drain gpu0 | python3 "$work/show.py" drain
  sleep 4
  echo "-- admin: load-bitstream fpga0 u280-sextans-gemm.yaml (drain fpga0, load, re-plan)"
  "${admin[@]}" load-bitstream fpga0 u280-sextans-gemm.yaml | python3 "$work/show.py" load
  sleep 4
  echo "-- admin: undrain gpu0"
  "${admin[@]}" undrain gpu0 | python3 "$work/show.py" drain
) &
swapper=$!
# Paced at 25 req/s so the operator's changes (at 4, 8 and 12 s) land inside the stream.
"${client[@]}" stream --model gcn --requests 400 --rate 25 --concurrency 4 \
  --drift "0:2000x16000,130:20000x200000,260:2000x16000"
wait "$swapper"

echo "== re-plans of gcn (cause: old -> new)"
"${admin[@]}" --model gcn plan | python3 "$work/show.py" replans
echo "== plan after the stream"
plans
# The data drives the next plans: the transformer's sequence length jumps 256 -> 8192 -> 256 and
# the daemon re-plans on its own (the window attention moves to FPGAs running SWAT and back).
echo "-- admin: load-bitstream fpga0 u280-sextans-swat.yaml (every FPGA on the SWAT image again)"
"${admin[@]}" load-bitstream fpga0 u280-sextans-swat.yaml | python3 "$work/show.py" load
echo "== swin-transformer: three phases, sequence length 256 -> 8192 -> 256 (window 16 / 512 / 16)"
for phase in "256x16" "8192x512" "256x16"; do
  echo "-- phase seq x window $phase, 40 requests"
  "${client[@]}" stream --model swin-transformer --requests 40 --concurrency 2 --drift "0:$phase" |
    grep -E '^(summary|  plan epoch)' | sed 's/^/   /'
done
echo "== re-plans of swin-transformer caused by the data (old -> new, predicted gain modelled; the"
echo "   measured throughput before and after each is in the per-epoch lines of the phases above)"
"${admin[@]}" --model swin-transformer plan | python3 "$work/show.py" drift-replans

echo "== a streaming graph: the gcn's graph registered once with its features, then 300 updates of"
echo "   2 random edges, then 20 bulk loads of 2000; each answer recomputes only the rows the update"
echo "   reached (exact), and the planner prices every update both ways (kept on the CPU, or the"
echo "   changed nodes' computation subgraph through the planned pipeline): answers move to the cheaper"
"${client[@]}" stream --model gcn --updates drift --update-drift 0:2,300:2000 --requests 320 \
  --nodes 20000 --edges 200000 | grep -vE '^\[' | sed 's/^/   /'
curl -s "http://127.0.0.1:$metrics/metrics" | grep -E '^dype_graph_(activation_bytes|answer_mode_switches_total)' | sed 's/^/   /'

echo "== energy (modelled) from /metrics"
curl -s "http://127.0.0.1:$metrics/metrics" | grep -E '^dype_inference_energy_joules(_total)?\{model="gcn"' | sed 's/^/  /'

echo "== SIGTERM: readiness off, in-flight requests finish, exit 0"
kill -TERM "$pid"
status=0
wait "$pid" || status=$?
pid=""
tail -n 3 "$work/serve.log" | sed 's/^/  serve| /'
echo "dype-serve exit status: $status"
exit "$status"
