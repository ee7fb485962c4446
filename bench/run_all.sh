#!/usr/bin/env bash
# Every benchmark that prints a ratio against a peer or a target, at a size that takes about 10
# minutes on 2 cores, recorded as one JSON (bench/results/runs/<date>_<host>.json: machine, CPU
# model, threads, date, commit, and each metric's value, unit, peer, kind, direction and target),
# then compared with the per-metric median of the last 3 runs recorded on the same CPU model and
# thread count (bench/compare.py): a ratio that fell by more than the tolerance is re-run once (its
# suite) before it is called a slip.
# docs/benchmarks.md is regenerated from the recorded run (bench/results.py table).
#
# Suites (each one log; figures measured unless marked modelled):
#   kernels      bench/run_kernel_peers.sh: SpMM vs torch/Eigen, GEMM vs oneDNN/Eigen/torch
#   attention    bench/run_attention_peers.sh: window attention vs torch chunked/dense (seq 4096,
#                16384: chunked only) and memory growth
#   models       bench/run_model_peers.sh: GCN, GraphSAGE, GIN vs torch on the Debian graph
#   transformer  bench/run_transformer_peers.sh: encoder vs nn.TransformerEncoder (seq 1024 w 128,
#                seq 4096 w 256)
#   scheduler    bench_scheduler: solve times (GCN S1 default and flat/loaded, target <= 100 us)
#   runtime      bench_runtime: drift stream dynamic vs static vs oracle (modelled), engine overhead
#   prediction   bench_prediction: predicted vs pipeline period, every Table I plan (modelled)
#   serving      bench/run_serving_path.sh: in-process time vs dype-client p50 over gRPC (TCP and a
#                Unix socket) and HTTP, raw and through shared memory, beside the bare-socket floor
#   daemon       bench_daemon_http --only overhead: the HTTP front end's overhead per request
#   streaming    bench/run_streaming_graph.sh: one edge + answer vs a whole-graph request through
#                dype-serve, batched edges/s (and the same in process, bench_incremental)
#
#   bench/run_all.sh [--build DIR] [--no-build] [--only SUITE,...] [--out FILE] [--notes TEXT]
#                    [--tolerance 0.10] [--against RUN.json] [--no-compare] [--no-rerun]
#   --build DIR   release build folder (default build/benchall; configured with the release preset
#                 and only the targets the suites need built, unless --no-build)
#   --out FILE    write the run here instead of bench/results/runs/ (then docs/benchmarks.md is left
#                 alone and the run is not recorded for later comparisons)
#   --against F   compare with F alone instead of the median of the last 3 recorded runs on this
#                 CPU model
#   Env: THREADS (2), SUITE_TIMEOUT (900 s per suite)
# Exit status: 0 all ran and no ratio slipped; 1 a benchmark failed (the others still ran and are
# recorded); 4 a ratio fell by more than the tolerance in the run and in its re-run, a ratio between
# two of dype's own paths missed its target both times, or a ratio the baseline had is missing; 2
# bad usage.
set -uo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build/benchall
do_build=1
only=""
out=""
notes=""
tolerance=0.10
against=""
do_compare=1
do_rerun=1
threads=${THREADS:-2}
suite_timeout=${SUITE_TIMEOUT:-900}
suite_body_only=()
all_suites=(kernels attention models transformer scheduler runtime prediction serving daemon streaming)

usage() { sed -n '2,/^set -uo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }
while (($#)); do
  case $1 in
    --build) build=$(realpath -m "$2"); shift 2 ;;
    --no-build) do_build=0; shift ;;
    --only) only=$2; shift 2 ;;
    --out) out=$(realpath -m "$2"); shift 2 ;;
    --notes) notes=$2; shift 2 ;;
    --tolerance) tolerance=$2; shift 2 ;;
    --against) against=$(realpath -m "$2"); shift 2 ;;
    --no-compare) do_compare=0; shift ;;
    --no-rerun) do_rerun=0; shift ;;
    --suite-body) suite_body_only=("$2" "$3"); shift 3 ;;  # internal: one suite, output to stdout
    -h|--help) usage; exit 0 ;;
    *) echo "run_all: unknown argument $1 (--help)" >&2; exit 2 ;;
  esac
done
suites=("${all_suites[@]}")
if [[ -n "$only" ]]; then
  IFS=, read -r -a suites <<<"$only"
  for s in "${suites[@]}"; do
    [[ " ${all_suites[*]} " == *" $s "* ]] || { echo "run_all: unknown suite $s (${all_suites[*]})" >&2; exit 2; }
  done
fi

python=/usr/bin/python3
export OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads MKL_NUM_THREADS=$threads
# One suite's commands; its RESULT lines go to stdout (the log).
suite_body() {
  local name=$1 tmp=$2
  case $name in
    kernels) THREADS=$threads REPS=7 NO_BUILD=1 bash "$root/bench/run_kernel_peers.sh" "$build" ;;
    attention) THREADS=$threads SEQ_LENS="4096 16384" REPS=5 bash "$root/bench/run_attention_peers.sh" "$build" ;;
    models) THREADS=$threads REPS=7 NO_BUILD=1 bash "$root/bench/run_model_peers.sh" "$build" ;;
    transformer)
      # Both shapes the README quotes; the second's status is the suite's.
      local rc=0
      THREADS=$threads SEQ=1024 WINDOW=128 REPS=5 NO_BUILD=1 bash "$root/bench/run_transformer_peers.sh" "$build" ||
        rc=$?
      THREADS=$threads SEQ=4096 WINDOW=256 REPS=5 NO_BUILD=1 bash "$root/bench/run_transformer_peers.sh" "$build" &&
        return "$rc" ;;
    scheduler)
      # The medians Google Benchmark writes as JSON (--benchmark_out); its console output as is.
      "$build/bench/bench_scheduler" --benchmark_out="$tmp/scheduler.json" --benchmark_out_format=json &&
        "$python" "$root/bench/results.py" extract scheduler "$tmp/scheduler.json" ;;
    runtime)
      "$build/bench/bench_runtime" --json "$tmp/runtime.json" &&
        "$python" "$root/bench/results.py" extract runtime "$tmp/runtime.json" ;;
    prediction)
      "$build/bench/bench_prediction" --json "$tmp/prediction.json" &&
        "$python" "$root/bench/results.py" extract prediction "$tmp/prediction.json" ;;
    serving) THREADS=$threads REPS=7 REQUESTS=200 bash "$root/bench/run_serving_path.sh" "$build" ;;
    daemon)
      "$build/bench/bench_daemon_http" --only overhead --requests 2000 --json "$tmp/daemon.json" &&
        "$python" "$root/bench/results.py" extract daemon_http "$tmp/daemon.json" ;;
    streaming) UPDATES=300 BATCH=1000 BATCHES=20 REQUESTS=30 bash "$root/bench/run_streaming_graph.sh" "$build" ;;
  esac
}
if ((${#suite_body_only[@]})); then
  suite_body "${suite_body_only[@]}"
  exit
fi
stamp=$(date -u +%Y-%m-%dT%H%M%SZ)
started=$(date -u +%Y-%m-%dT%H:%M:%S+00:00)
record=0
if [[ -z "$out" ]]; then
  out=$root/bench/results/runs/${stamp}_$(hostname -s).json
  record=1
fi
logs=$build/run_all-logs/$stamp
mkdir -p "$logs"
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
# The commit and the changed tracked files as the build sees them (others may commit meanwhile).
git -C "$root" rev-parse HEAD >"$logs/git-head.txt" 2>/dev/null
git -C "$root" status --porcelain --untracked-files=no >"$logs/git-status.txt" 2>/dev/null
t0=$SECONDS
echo "== run_all: ${suites[*]}; build $build; threads $threads; logs $logs"
echo "   $(uptime)"

targets_of() {
  case $1 in
    kernels) echo bench_spmm bench_gemm ;;
    attention) echo bench_attention ;;
    models|transformer) echo bench_model_inference ;;
    scheduler) echo bench_scheduler ;;
    runtime) echo bench_runtime ;;
    prediction) echo bench_prediction ;;
    serving) echo bench_model_inference dype-serve dype-client ;;
    daemon) echo bench_daemon_http ;;
    streaming) echo bench_incremental dype-serve dype-client ;;
  esac
}
# The runtime suite's engine overhead is measured, its drift figures modelled (each metric says so).
basis_of() { case $1 in prediction) echo modelled ;; runtime) echo "modelled+measured" ;; *) echo measured ;; esac; }

build_failed=0
if ((do_build)); then
  read -r -a targets <<<"$(for s in "${suites[@]}"; do targets_of "$s"; done | tr ' ' '\n' | sort -u | tr '\n' ' ')"
  echo "== building ${targets[*]} (release) in $build"
  if ! { cmake --preset release -B "$build" >"$logs/build.log" 2>&1 &&
         cmake --build "$build" -j2 --target "${targets[@]}" >>"$logs/build.log" 2>&1; }; then
    tail -30 "$logs/build.log"
    echo "run_all: the build failed (log: $logs/build.log); every suite is recorded as failed" >&2
    build_failed=1
  fi
fi

# run_suite NAME LOG: runs it (this script, --suite-body) under a time limit; prints "rc seconds".
run_suite() {
  local name=$1 log=$2 start=$SECONDS rc=0 tmp
  tmp=$(mktemp -d)
  timeout --kill-after=30 "$suite_timeout" bash "$0" --build "$build" --suite-body "$name" "$tmp" \
    >"$log" 2>&1 || rc=$?
  rm -rf "$tmp"
  echo "$rc $((SECONDS - start))"
}

: >"$logs/suites.txt"
for s in "${suites[@]}"; do
  echo "== $s ($(basis_of "$s"); $(date +%H:%M:%S), load $(cut -d' ' -f1 /proc/loadavg))"
  if ((build_failed)); then
    # Not run on binaries the failed build left behind.
    echo "not run: the build failed ($logs/build.log)" >"$logs/$s.log"
    rc=125 secs=0
  else
    read -r rc secs < <(run_suite "$s" "$logs/$s.log")
  fi
  grep '^RESULT ' "$logs/$s.log" | sed 's/^RESULT /   /' | cut -c1-160
  if [[ $rc != 0 ]]; then
    echo "   $s: exit $rc after ${secs}s; last lines of $logs/$s.log:"
    grep -v '^RESULT ' "$logs/$s.log" | tail -5 | sed 's/^/   | /'
  fi
  echo "$s $rc $secs $(basis_of "$s")" >>"$logs/suites.txt"
done

record_run() {
  "$python" "$root/bench/results.py" record --logs "$logs" --suites "$logs/suites.txt" --out "$out" \
    --notes "$notes" --threads "$threads" --started "$started" --seconds "$((SECONDS - t0))" \
    --load-start "$load_start" "$@"
}
record_run
record_rc=$?

status=0
((record_rc == 0)) || status=1
if ((do_compare)); then
  compare=("$python" "$root/bench/compare.py" "$out" ${against:+"$against"} --tolerance "$tolerance")
  echo "== compare"
  compare_rc=0
  "${compare[@]}" --flagged-out "$logs/flagged.txt" || compare_rc=$?
  fell=$(awk '$3 == "fell" || $3 == "missed" { print $1 }' "$logs/flagged.txt" | sort -u)
  if ((compare_rc == 1 && do_rerun)) && [[ -n "$fell" ]]; then
    awk '$3 == "fell" || $3 == "missed" { print $1, $2 }' "$logs/flagged.txt" >"$logs/reruns.txt"
    for s in $fell; do
      echo "== re-running $s once (a ratio fell; $(date +%H:%M:%S), load $(cut -d' ' -f1 /proc/loadavg))"
      read -r rc secs < <(run_suite "$s" "$logs/$s.rerun.log")
      echo "   exit $rc after ${secs}s"
    done
    record_run --reruns "$logs/reruns.txt" >/dev/null
    echo "== compare after the re-run (a ratio is called only if it fell both times)"
    compare_rc=0
    "${compare[@]}" --flagged-out "$logs/flagged.txt" || compare_rc=$?
  fi
  if ((compare_rc != 0 && status == 0)); then
    status=$((compare_rc == 1 ? 4 : 1))
  fi
fi

if ((record)); then
  "$python" "$root/bench/results.py" table "$out" --md "$root/docs/benchmarks.md" \
    --plot "$root/docs/benchmarks-history.png" || status=1
fi
echo "== run_all: $(( (SECONDS - t0) / 60 )) min $(( (SECONDS - t0) % 60 )) s; run $out; logs $logs; exit $status"
exit $status
