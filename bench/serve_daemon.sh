# Sourced by the benchmarks that run dype-serve (run_serving_path.sh, run_streaming_graph.sh), after
# they set root, build and python:
#   serve_workdir         the real graph (GRAPH, default the Debian dependency graph, written to
#                         /tmp once) and a work folder with repo/, graphs/ (the graph linked) and
#                         state/, removed on exit together with the daemon
#   start_daemon ARGS...  dype-serve on free ports over that folder (ARGS first: --allow-client-shm),
#                         waited for (60 s at most); exits the script when it does not start
#   port NAME             a port it chose: http, grpc or metrics
serve_workdir() {
  graph=${GRAPH:-/tmp/dype-debian-deps.mtx}
  [[ -s "$graph" ]] || "$python" "$root/apps/dype-profile/real_graphs.py" debian-deps "$graph"
  work=$(mktemp -d)
  pid=""
  trap serve_cleanup EXIT
  mkdir -p "$work/repo" "$work/graphs" "$work/state"
  ln -s "$(realpath "$graph")" "$work/graphs/$(basename "$graph")"
}

# shellcheck disable=SC2317  # run by the EXIT trap
serve_cleanup() {
  if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}

start_daemon() {
  "$build/apps/dype-serve" "$@" --mode perf --model-repository "$work/repo" --state-dir "$work/state" \
    --http-port 0 --grpc-port 0 --metrics-port 0 --port-file "$work/ports.json" --exit-timeout 10 \
    >"$work/serve.log" 2>&1 &
  pid=$!
  for _ in $(seq 1 300); do
    [[ -s "$work/ports.json" ]] && return 0
    kill -0 "$pid" 2>/dev/null || { sed 's/^/  serve| /' "$work/serve.log"; echo "dype-serve exited while starting" >&2; exit 1; }
    sleep 0.2
  done
  sed 's/^/  serve| /' "$work/serve.log"
  echo "dype-serve did not start in 60 s" >&2
  exit 1
}

port() { sed -n "s/.*\"$1\": *\([0-9]*\).*/\1/p" "$work/ports.json"; }
