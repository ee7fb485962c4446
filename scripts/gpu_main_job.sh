#!/usr/bin/env bash
# The main job on this host, as scripts/gpu_check.sh runs it on a GPU machine: starts bare
# `dype-serve --mode balanced` (no --system: the host is detected) serving a model repository with
# one GCN 128 -> 128 -> 16 (seeded weights, scripts/gpu_main_job.py), streams requests on the given
# graph through `dype-client` over gRPC (the graph registered once, 128 features per node sent with
# each request; then again with x and y in system shared-memory regions, dype-client --shm, whose
# p50 is printed beside the rest and whose failure does not fail the job; and once more over
# dype-serve's Unix-domain socket, --grpc-socket, printed likewise, beside the floor under both:
# x alone over a bare TCP loopback and Unix-domain socket, bench/socket_floor.py), sends one request with
# known features and keeps the answer, reads the plan from
# the daemon (`dype-client admin plan`) and stops the daemon (SIGTERM; on every exit path).
# It FAILS unless the plan that answered uses a GPU (its mnemonic holds a G). Where torch_geometric
# imports in python3, the weights come from PyG's models.GCN and dype's answer is checked against
# PyG's on the same GPU (max abs diff <= 1e-4 against PyG run in float64; the float32 run's diff,
# and its own error, printed beside it), and dype's request p50 is printed beside PyG's whole
# request; without PyG the answer's shape and finiteness are checked.
#
#   bash scripts/gpu_main_job.sh --bin build/gpu-check/apps --graph /tmp/dype-real-graphs/debian-deps.mtx
#
# Environment: MAIN_JOB_REQUESTS (60) streamed requests (at 12, the p50 of the H200 run of 2026-11-27
# fell on the first requests after a plan swap, 3-7 per plan); MAIN_JOB_START_SECS (90) for the daemon
# to come up (a detected GPU without fitted models is timed at start); MAIN_JOB_CALL_SECS (60) per
# client call; PYTHON (python3); MAIN_JOB_PYTHON_LD_LIBRARY_PATH: LD_LIBRARY_PATH for python (the
# bundle's libraries must not shadow the ones torch loads); DYPE_MAIN_JOB_REFERENCE auto|pyg|torch|none
# (auto: PyG where it imports; torch: a plain-torch GCN, for machines without PyG).
# DYPE_MAIN_JOB_ALLOW_CPU=1 accepts a plan without a GPU: a dry run of the flow on a machine
# without one, reported as such; never set it on the GPU machine.
set -euo pipefail
cd "$(dirname "$0")/.."

bin="" graph=""
while (($#)); do
  case "$1" in
    --bin) bin=$2; shift 2 ;;
    --graph) graph=$2; shift 2 ;;
    *) echo "gpu_main_job: unknown argument '$1' (--bin DIR, --graph FILE.mtx)" >&2; exit 2 ;;
  esac
done
[[ -x "$bin/dype-serve" && -x "$bin/dype-client" ]] || { echo "main job: FAILED: no dype-serve and dype-client in '$bin'"; exit 1; }
[[ -s "$graph" ]] || { echo "main job: FAILED: graph '$graph' not found"; exit 1; }
requests=${MAIN_JOB_REQUESTS:-60}
start_secs=${MAIN_JOB_START_SECS:-90}
call_secs=${MAIN_JOB_CALL_SECS:-60}
python=${PYTHON:-python3}
allow_cpu=${DYPE_MAIN_JOB_ALLOW_CPU:-0}
model=gcn-main
cuda_py() {  # the CUDA shared-memory client, its output into $1, under the call limit
  local log=$1; shift
  if [[ -v MAIN_JOB_PYTHON_LD_LIBRARY_PATH ]]; then
    LD_LIBRARY_PATH=$MAIN_JOB_PYTHON_LD_LIBRARY_PATH bounded "$python" -u scripts/gpu_cuda_shm_client.py "$@" > "$log" 2>&1
  else
    bounded "$python" -u scripts/gpu_cuda_shm_client.py "$@" > "$log" 2>&1
  fi
}
py() {
  if [[ -v MAIN_JOB_PYTHON_LD_LIBRARY_PATH ]]; then
    LD_LIBRARY_PATH=$MAIN_JOB_PYTHON_LD_LIBRARY_PATH "$python" -u scripts/gpu_main_job.py "$@"
  else
    "$python" -u scripts/gpu_main_job.py "$@"
  fi
}

work=$(mktemp -d /tmp/dype-main-job.XXXXXX)
pid="" child=""
cleanup() {
  if [[ -n "$child" ]]; then kill -TERM "$child" 2>/dev/null || true; fi
  if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
fail() { echo "main job: FAILED: $*"; exit 1; }
# A client call under a time limit, waited for in the background: a signal to this script is
# handled at once (bash runs traps only after a foreground command ends).
bounded() {
  timeout "$call_secs" "$@" &
  child=$!
  local rc=0
  wait "$child" || rc=$?
  child=""
  return "$rc"
}
serve_log() { sed 's/^/  serve| /' "$work/serve.log"; }

t_start=$SECONDS
if [[ "$allow_cpu" == 1 ]]; then
  echo "  DRY RUN (DYPE_MAIN_JOB_ALLOW_CPU=1): a plan without a GPU is accepted; this proves the flow, not the GPU"
fi
mkdir -p "$work/repo" "$work/graphs"
ln -s "$(realpath "$graph")" "$work/graphs/$(basename "$graph")"
py prepare --graph "$graph" --repo "$work/repo" --name "$model" --features "$work/x.npy" ||
  fail "could not write the model repository"

head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$work/token"
echo "  starting bare dype-serve --mode balanced (host detected), repository: $model"
"$bin/dype-serve" --mode balanced --allow-client-shm --grpc-socket "$work/grpc.sock" --model-repository "$work/repo" --http-port 0 --grpc-port 0 --metrics-port 0 \
  --port-file "$work/ports.json" --admin-token-file "$work/token" --exit-timeout 10 > "$work/serve.log" 2>&1 &
pid=$!
for _ in $(seq 1 $((start_secs * 5))); do
  [[ -s "$work/ports.json" ]] && break
  kill -0 "$pid" 2>/dev/null || { serve_log; fail "dype-serve exited while starting"; }
  sleep 0.2
done
[[ -s "$work/ports.json" ]] || { serve_log; fail "dype-serve did not serve within ${start_secs} s"; }
echo "  serving after $((SECONDS - t_start)) s"
serve_log
port() { sed -n "s/.*\"$1\": *\([0-9]*\).*/\1/p" "$work/ports.json"; }
client=("$bin/dype-client" --protocol grpc --http-port "$(port http)" --grpc-port "$(port grpc)"
        --metrics-port "$(port metrics)")
plan_of() {  # prints: label TAB epoch TAB pipeline TAB cost source
  bounded "${client[@]}" admin --token-file "$work/token" --model "$model" plan | py plan
}
show_plan() { awk -F'\t' -v w="$1" '{printf "  plan %s: %s [%s], epoch %s, kernel times from %s\n", w, $1, $3, $2, $4}' <<< "$2"; }

p0=$(plan_of) || fail "could not read the plan"
show_plan "at start" "$p0"
echo "  dype-client stream: $requests requests on $(basename "$graph") over one gRPC stream"
bounded "${client[@]}" stream --model "$model" --dir "$work/graphs" --per-file "$requests" \
  --requests "$requests" --concurrency 1 > "$work/stream.log" 2>&1 || { sed 's/^/  client| /' "$work/stream.log"; fail "the stream failed"; }
sed 's/^/  client| /' "$work/stream.log"
p50=$(sed -n 's/^summary.* p50 \([0-9.e+-]*\) ms.*/\1/p' "$work/stream.log")
echo "  dype-client stream --shm: the same through system shared-memory regions (x written once)"
shm_p50=-1
if bounded "${client[@]}" stream --shm --model "$model" --dir "$work/graphs" --per-file "$requests" \
    --requests "$requests" --concurrency 1 > "$work/stream_shm.log" 2>&1; then
  sed 's/^/  client| /' "$work/stream_shm.log"
  shm_p50=$(sed -n 's/^summary.* p50 \([0-9.e+-]*\) ms.*/\1/p' "$work/stream_shm.log")
else
  sed 's/^/  client| /' "$work/stream_shm.log"
  echo "  (the shared-memory stream failed: reported above, not counted against the main job)"
fi
echo "  dype-client stream --grpc-socket: the same raw contents over dype-serve's Unix-domain socket"
if bounded "${client[@]}" --grpc-socket "$work/grpc.sock" stream --model "$model" --dir "$work/graphs" \
    --per-file "$requests" --requests "$requests" --concurrency 1 > "$work/stream_unix.log" 2>&1; then
  sed 's/^/  client| /' "$work/stream_unix.log"
else
  sed 's/^/  client| /' "$work/stream_unix.log"
  echo "  (the Unix-socket stream failed: reported above, not counted against the main job)"
fi
py buffers --port "$(port metrics)" || echo "  (the receive buffers could not be read: not counted against the main job)"
# The floor under the raw streams on this host: x alone over a bare TCP loopback and Unix-domain
# socket between two processes (stdlib only). x.npy is format 1.0: a 10-byte preamble whose last
# two bytes are the header's length, then the data.
x_bytes=$(( $(stat -c %s "$work/x.npy") - 10 - $(od -An -tu2 -j8 -N2 "$work/x.npy") ))
if floor=$(bounded "$python" bench/socket_floor.py "$x_bytes" 10 2>&1); then
  sed -E "s/^([a-z_]+) /  x ($x_bytes bytes) over a bare \1: /" <<<"$floor"
else
  echo "  (the socket floor could not be measured: $floor; not counted against the main job)"
fi
p1=$(plan_of) || fail "could not read the plan"
show_plan "after the stream" "$p1"
echo "  dype-client infer: one request with the seeded features, answer kept"
bounded "${client[@]}" infer --model "$model" --graph "$graph" --features "$work/x.npy" \
  --out "$work/y.npy" --top-k 0 > "$work/infer.log" 2>&1 || { sed 's/^/  client| /' "$work/infer.log"; fail "the infer request failed"; }
sed 's/^/  client| /' "$work/infer.log"
p2=$(plan_of) || fail "could not read the plan"
show_plan "that answered it" "$p2"
bounded "${client[@]}" admin --token-file "$work/token" devices > "$work/devices.json" 2>&1 || true
# CUDA shared memory, from a client dype did not write (HTTP + the CUDA runtime through ctypes): x
# and y in GPU memory of that client's, the answer checked against the kept one. Where the python
# has no CUDA it says so; a failure is reported, not counted against the main job.
cuda_shm_p50=-1
echo "  CUDA shared memory (scripts/gpu_cuda_shm_client.py): x and y cudaMalloc'd by a python client, $requests requests"
if cuda_py "$work/cuda_shm.log" --http-port "$(port http)" --model "$model" --graph "$graph" \
    --features "$work/x.npy" --expect "$work/y.npy" --requests "$requests"; then
  grep -v '^cuda_shm_p50_ms' "$work/cuda_shm.log" || true
  cuda_shm_p50=$(sed -n 's/^cuda_shm_p50_ms \([0-9.]*\)$/\1/p' "$work/cuda_shm.log")
else
  sed 's/^/  | /' "$work/cuda_shm.log"
  echo "  (the CUDA shared-memory client failed: reported above, not counted against the main job)"
fi

# The same through dype-client --cuda-shm (its own CUDA regions), over gRPC and HTTP: its checksum
# must equal the kept answer's. Reported, not counted against the main job.
want_sum=$(sed -n 's/.*checksum \(sum=[^ ]* abs_sum=[^ ]*\).*/\1/p' "$work/infer.log")
for proto in grpc http; do
  echo "  dype-client --protocol $proto infer --cuda-shm: x and y in the client's GPU memory"
  if bounded "$bin/dype-client" --protocol "$proto" --http-port "$(port http)" --grpc-port "$(port grpc)" \
      --metrics-port "$(port metrics)" infer --cuda-shm --model "$model" --graph "$graph" \
      --features "$work/x.npy" --top-k 0 > "$work/infer_cuda_$proto.log" 2>&1; then
    sed 's/^/  client| /' "$work/infer_cuda_$proto.log"
    got_sum=$(sed -n 's/.*checksum \(sum=[^ ]* abs_sum=[^ ]*\).*/\1/p' "$work/infer_cuda_$proto.log")
    [[ -n "$got_sum" && "$got_sum" == "$want_sum" ]] && echo "  the same checksum as the kept answer ($got_sum)" ||
      echo "  (checksum $got_sum differs from the kept answer's $want_sum)"
  else
    sed 's/^/  client| /' "$work/infer_cuda_$proto.log"
    echo "  (dype-client --cuda-shm failed: reported above, not counted against the main job)"
  fi
done
echo "  dype-client stream --cuda-shm: $requests requests over one gRPC stream, x written once into GPU memory"
if bounded "${client[@]}" stream --cuda-shm --model "$model" --dir "$work/graphs" --per-file "$requests" \
    --requests "$requests" --concurrency 1 > "$work/stream_cuda.log" 2>&1; then
  sed 's/^/  client| /' "$work/stream_cuda.log"
else
  sed 's/^/  client| /' "$work/stream_cuda.log"
  echo "  (the CUDA shared-memory stream failed: reported above, not counted against the main job)"
fi

kill -TERM "$pid"
status=0
wait "$pid" || status=$?
pid=""
echo "  dype-serve stopped (SIGTERM), exit status $status, $((SECONDS - t_start)) s after the start"
[[ "$status" == 0 ]] || { serve_log; fail "dype-serve exited with status $status"; }

label=$(cut -f1 <<< "$p2")
[[ "$(cut -f1,2 <<< "$p1")" == "$(cut -f1,2 <<< "$p2")" ]] ||
  echo "  (the plan changed between the stream and the kept answer: the answer came from the later one)"
echo "  the devices as the daemon planned them (dype-client admin devices):"
py devices < "$work/devices.json" || sed 's/^/  /' "$work/devices.json"
gpu_plan=0
[[ "$label" == *G* ]] && gpu_plan=1

py compare --graph "$graph" --weights "$work/repo/$model/model.safetensors" --features "$work/x.npy" \
  --dype-out "$work/y.npy" --dype-p50-ms "${p50:--1}" --dype-shm-p50-ms "${shm_p50:--1}" --dype-cuda-shm-p50-ms "${cuda_shm_p50:--1}" --dype-requests "$requests" \
  --reference "${DYPE_MAIN_JOB_REFERENCE:-auto}" || fail "the answer check failed (above)"

if [[ "$gpu_plan" == 1 ]]; then
  echo "main job: passed: plan $label uses the GPU, $((SECONDS - t_start)) s"
elif [[ "$allow_cpu" == 1 ]]; then
  echo "main job: DRY RUN passed on plan $label (no GPU in it; accepted only because DYPE_MAIN_JOB_ALLOW_CPU=1), $((SECONDS - t_start)) s"
else
  fail "the plan that answered, $label, does not use the GPU (no G in its mnemonic)"
fi
