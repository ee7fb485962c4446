# Sourced by the peer benchmarks (run_kernel_peers.sh, run_attention_peers.sh, run_model_peers.sh,
# run_transformer_peers.sh, run_serving_path.sh):
#   peer_args BUILD REPS "$@"  build (the script's first argument, else $root/BUILD), threads
#                            (THREADS, 2) and reps (REPS, else REPS)
#   torch_python NAME        sets python to an interpreter with torch and numpy (Debian's
#                            python3-torch lives in /usr/bin/python3; a pyenv/venv python3 may not
#                            see it), or exits 3 naming the script
#   build_model_bench BUILD  builds bench_model_inference (release) there unless NO_BUILD=1
#   same_threads N           N threads for every BLAS/OpenMP peer, and `tunables`: the heap policy
#                            dype sets for itself (runtime/host_memory.h), for the peer's
#                            GLIBC_TUNABLES: large freed blocks stay in the heap for reuse instead of
#                            being unmapped and faulted in again next call
peer_args() {
  build=${3:-$root/$1}
  threads=${THREADS:-2}
  reps=${REPS:-$2}
}

torch_python() {
  python=""
  for candidate in /usr/bin/python3 python3; do
    if command -v "$candidate" >/dev/null && "$candidate" -c "import torch, numpy" 2>/dev/null; then
      python=$candidate
      return 0
    fi
  done
  echo "$1: peer missing: no python3 with torch and numpy (scripts/setup.sh)" >&2
  exit 3
}

build_model_bench() {
  [[ "${NO_BUILD:-0}" == 1 ]] && return 0
  echo "== building bench_model_inference (release) in $1"
  cmake --preset release -B "$1" >/dev/null
  cmake --build "$1" -j2 --target bench_model_inference >/dev/null
}

same_threads() {
  export OMP_NUM_THREADS=$1 OPENBLAS_NUM_THREADS=$1 MKL_NUM_THREADS=$1
  tunables="glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=1073741824"
}
