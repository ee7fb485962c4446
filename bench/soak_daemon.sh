#!/usr/bin/env bash
# Soak test of dype-serve: start the daemon on the emulated paper testbed (balanced mode), drive it
# with `dype-client stream` for MINUTES minutes (a drifting GCN workload over HTTP, the graphs
# registered once per client run and deleted after it), sample the daemon's RSS every
# SOAK_SAMPLE_S seconds and print it over time with first/last/max. Exits non-zero when, after the warm-up, RSS grows by more than
# SOAK_MAX_GROWTH_PCT percent plus SOAK_SLACK_MB (median of the last 5 samples vs median of the
# first 5 samples after warm-up), when any request fails, or when the daemon does not stop cleanly.
#
#   bench/soak_daemon.sh [MINUTES]          (default 10)
#
# Environment: BUILD (default build/release, the release preset), SOAK_RATE (requests/s at most, default 300),
# SOAK_CONCURRENCY (default 4), SOAK_RUN_S (seconds per client run, default 60), SOAK_SAMPLE_S (default 5),
# SOAK_WARMUP_S (default 60), SOAK_MAX_GROWTH_PCT (default 10), SOAK_SLACK_MB (default 8).
# Every figure is measured on this machine (RSS from /proc/PID/status).
set -euo pipefail

minutes=${1:-10}
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$root/build/release}
[[ $build = /* ]] || build=$root/$build
rate=${SOAK_RATE:-300}
concurrency=${SOAK_CONCURRENCY:-4}
run_s=${SOAK_RUN_S:-60}
sample_s=${SOAK_SAMPLE_S:-5}
warmup_s=${SOAK_WARMUP_S:-60}
max_growth_pct=${SOAK_MAX_GROWTH_PCT:-10}
slack_mb=${SOAK_SLACK_MB:-8}
serve=$build/apps/dype-serve
client=$build/apps/dype-client
for exe in "$serve" "$client"; do
  [[ -x $exe ]] || { echo "soak_daemon.sh: $exe not built (cmake --build $build --target dype-serve dype-client)" >&2; exit 2; }
done

work=$(mktemp -d)
daemon_pid=""
driver_pid=""
cleanup() {
  [[ -n $driver_pid ]] && kill "$driver_pid" 2>/dev/null || true
  [[ -n $daemon_pid ]] && kill "$daemon_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

"$serve" --builtin-models --system "$root/configs/systems/paper-testbed-pcie4.yaml" --mode balanced --http-port 0 --grpc-port 0 \
  --metrics-port 0 --port-file "$work/ports.json" --log-level warn >"$work/serve.log" 2>&1 &
daemon_pid=$!
for _ in $(seq 1 600); do
  [[ -s $work/ports.json ]] && break
  kill -0 "$daemon_pid" 2>/dev/null || { cat "$work/serve.log" >&2; echo "soak_daemon.sh: dype-serve exited" >&2; exit 2; }
  sleep 0.1
done
http_port=$(sed -E 's/.*"http": ([0-9]+).*/\1/' "$work/ports.json")
metrics_port=$(sed -E 's/.*"metrics": ([0-9]+).*/\1/' "$work/ports.json")
echo "soak: dype-serve pid $daemon_pid, HTTP port $http_port; $minutes min at $rate req/s, concurrency $concurrency;" \
  "load average $(cut -d' ' -f1-3 /proc/loadavg)"

deadline=$(( $(date +%s) + minutes * 60 ))
# Client runs of about run_s seconds each, each a drift schedule that moves between two graph
# sizes, until the deadline. A run sends rate x run_s requests paced at `rate`; when the machine
# sustains less, the next run is sized from the throughput the last one achieved, so runs stay
# near run_s and the soak ends near its deadline.
(
  run=0
  achieved=$rate
  while (( $(date +%s) < deadline )); do
    left=$(( deadline - $(date +%s) ))
    (( left < run_s )) && secs=$left || secs=$run_s
    (( secs < 1 )) && break
    n=$(( achieved * secs ))
    (( run == 0 && n > 200 )) && n=200   # the first run measures what the machine sustains
    (( n < 20 )) && n=20
    half=$(( n / 2 ))
    run=$(( run + 1 ))
    if ! "$client" --http-port "$http_port" --metrics-port "$metrics_port" stream --model gcn --requests "$n" \
        --rate "$rate" --concurrency "$concurrency" --drift "0:1000x8000,$half:4000x32000" --seed "$run" \
        >"$work/client_$run.log" 2>&1; then
      echo "client run $run failed:" >&2
      tail -5 "$work/client_$run.log" >&2
      echo "$run" >>"$work/failed_runs"
    fi
    grep -h '^summary' "$work/client_$run.log" | sed "s/^/  run $run: /" >>"$work/summaries"
    got=$(grep -ho '[0-9.]* req/s' "$work/client_$run.log" | tail -1 | cut -d' ' -f1 | cut -d. -f1)
    [[ -n $got ]] && (( got >= 1 && got < rate )) && achieved=$got || achieved=$rate
  done
) &
driver_pid=$!

rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$daemon_pid/status"; }
start=$(date +%s)
samples=()   # "seconds rss_kb"
printf '%8s %10s\n' "t[s]" "RSS[MB]"
while kill -0 "$driver_pid" 2>/dev/null; do
  kill -0 "$daemon_pid" 2>/dev/null || { echo "soak_daemon.sh: dype-serve died" >&2; cat "$work/serve.log" >&2; exit 1; }
  t=$(( $(date +%s) - start ))
  r=$(rss_kb)
  samples+=("$t $r")
  awk -v t="$t" -v r="$r" 'BEGIN { printf "%8d %10.1f\n", t, r / 1024 }'
  sleep "$sample_s"
done
wait "$driver_pid" || true
driver_pid=""

echo "client runs:"
cat "$work/summaries" 2>/dev/null || true

# Stop the daemon as an operator would; it must exit 0.
kill -TERM "$daemon_pid"
stop_rc=0
wait "$daemon_pid" || stop_rc=$?
daemon_pid=""

printf '%s\n' "${samples[@]}" | awk -v warm="$warmup_s" -v pct="$max_growth_pct" -v slack="$slack_mb" '
  function median(a, n,   i, j, t, b) {
    for (i = 1; i <= n; i++) b[i] = a[i]
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (b[j] < b[i]) { t = b[i]; b[i] = b[j]; b[j] = t }
    return (n % 2) ? b[(n + 1) / 2] : (b[n / 2] + b[n / 2 + 1]) / 2
  }
  { t[NR] = $1; r[NR] = $2 / 1024; if (NR == 1 || $2 / 1024 > mx) mx = $2 / 1024 }
  END {
    n = NR
    printf "RSS (measured): first %.1f MB, last %.1f MB, max %.1f MB over %d samples, %d s\n", r[1], r[n], mx, n, t[n]
    k = 0; for (i = 1; i <= n; i++) if (t[i] >= warm && k < 5) { k++; w[k] = r[i] }
    m = 0; for (i = n - 4; i <= n; i++) if (i >= 1 && t[i] >= warm) { m++; l[m] = r[i] }
    if (k < 5 || m < 5) { print "soak: too few samples after the warm-up to judge growth"; exit 3 }
    a = median(w, k); b = median(l, m); limit = a * (1 + pct / 100) + slack
    printf "after %d s warm-up: median of first 5 samples %.1f MB, of last 5 %.1f MB (growth %+.1f MB, %+.1f%%); limit %.1f MB (+%s%% + %s MB)\n", warm, a, b, b - a, (b - a) / a * 100, limit, pct, slack
    if (b > limit) { print "soak: FAIL, RSS grew past the limit"; exit 1 }
    print "soak: PASS, RSS flat within the limit"
  }' || { rc=$?; echo "soak_daemon.sh: RSS check failed ($rc)" >&2; exit "$rc"; }

if [[ -s $work/failed_runs ]]; then
  echo "soak_daemon.sh: client runs failed: $(tr '\n' ' ' <"$work/failed_runs")" >&2
  exit 1
fi
if (( stop_rc != 0 )); then
  echo "soak_daemon.sh: dype-serve exited $stop_rc after SIGTERM" >&2
  exit 1
fi
echo "soak: dype-serve stopped cleanly (exit 0); load average $(cut -d' ' -f1-3 /proc/loadavg)"
