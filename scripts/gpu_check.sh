#!/usr/bin/env bash
# The hardware check for a machine with an NVIDIA or AMD GPU: builds the GPU backend (CUDA or HIP,
# warnings as errors), runs the device conformance suite and the vendor tests on the real GPU, a
# GCN/GIN/transformer pipeline end to end against the CPU reference, and the library kernels
# (cuSPARSE/cuBLAS or rocSPARSE/own GEMM) against dype's CPU kernels. Every figure it prints is
# measured on the GPU it names, as is how far its copies overlap its kernels (bench_gpu_overlap).
# On a machine without a GPU it says so and exits 0.
#
#   bash scripts/gpu_check.sh            # installs what is missing first (scripts/setup.sh)
#   DYPE_SKIP_SETUP=1 bash scripts/gpu_check.sh   # packages already there (offline GPU machines)
#   bash scripts/gpu_check.sh --bundle build/gpu-bundle.tar.xz [--models]
#       a CUDA machine that cannot install Debian packages: runs what scripts/gpu_bundle.sh built
#       elsewhere (the CUDA libraries come from the machine's toolkit). --models also calibrates the
#       GPU (dype-calibrate), profiles its SpMM and GEMM models (dype-profile run, MODELS_BUDGET,
#       default 60s) and validates SpMM against the bundle's real graphs on the GPU, then profiles
#       and validates the host CPU the same way (CPU_BUDGET, default 180s; 0 skips it). The
#       calibrated system file and device profile (systems/, devices/<product id>.yaml), the model
#       stores (perfmodels/<product id>.json with their samples, for `dype-profile refit` and
#       `dype-serve --perfmodels` elsewhere) and each real graph's measured SpMM times
#       (real-graphs/<device>/<graph>.csv, for `dype-profile validate --measured`) are written to
#       MODELS_OUT (default: a fresh folder under /tmp, printed). A GPU whose product has a shipped
#       store (configs/perfmodels/<id>.json) is validated with that store too.
#
# Both ways it then runs the main job (scripts/gpu_main_job.sh, about a minute): bare `dype-serve
# --mode balanced` on this host serving a GCN 128 -> 128 -> 16 over the Debian dependency graph,
# requests through `dype-client`; the check fails unless the daemon's plan uses the GPU, and, where
# PyTorch Geometric imports in python3, unless dype's answer equals PyG's on the same GPU (1e-4).
set -euo pipefail
cd "$(dirname "$0")/.."
host_ld_library_path=${LD_LIBRARY_PATH-}  # python (torch) runs with the machine's own libraries

bundle=""
models=0
while (($#)); do
  case "$1" in
    --bundle) bundle=$(realpath "$2"); shift 2 ;;  # the script runs from the repository root
    --models) models=1; shift ;;
    *) echo "gpu_check: unknown argument '$1' (--bundle FILE, --models)" >&2; exit 2 ;;
  esac
done

vendor=""
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
  vendor=cuda
elif [ -e /dev/kfd ] && { command -v rocm-smi >/dev/null 2>&1 || [ -x /opt/rocm/bin/rocm-smi ]; }; then
  vendor=hip
fi
if [ -z "$vendor" ]; then
  echo "gpu_check: no NVIDIA or AMD GPU on this machine (nvidia-smi lists none, no /dev/kfd with rocm-smi): nothing to check"
  exit 0
fi

if [ -n "$bundle" ]; then
  [ "$vendor" = cuda ] || { echo "gpu_check: --bundle holds a CUDA build; this GPU is $vendor"; exit 1; }
  build=$(mktemp -d /tmp/dype-gpu-bundle.XXXXXX)
  tar -C "$build" -xf "$bundle"
  # The CUDA libraries from this machine's toolkit, or from the Python wheels that carry them.
  cuda_libs=""
  for d in /usr/local/cuda/lib64 /usr/local/cuda/lib $(find / -xdev -name 'libcusparse.so.*' -printf '%h\n' 2>/dev/null | sort -u); do
    [ -d "$d" ] && cuda_libs="$cuda_libs:$d"
  done
  export LD_LIBRARY_PATH="$build/lib$cuda_libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  echo "== gpu_check: NVIDIA GPU (prebuilt bundle $bundle, built with warnings as errors by scripts/gpu_bundle.sh)"
  nvidia-smi -L
else
  if [ "${DYPE_SKIP_SETUP:-0}" != 1 ]; then bash scripts/setup.sh; fi
  build=build/gpu-check
  flags=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DDYPE_WERROR=ON -DDYPE_BUILD_BENCH=ON -DDYPE_WITH_XRT=OFF)
  if [ "$vendor" = cuda ]; then
    echo "== gpu_check: NVIDIA GPU"; nvidia-smi -L
    flags+=(-DDYPE_WITH_CUDA=ON -DDYPE_WITH_HIP=OFF)
  else
    echo "== gpu_check: AMD GPU"; (rocm-smi --showproductname 2>/dev/null || /opt/rocm/bin/rocm-smi --showproductname) | grep -v '^=*$' || true
    flags+=(-DDYPE_WITH_CUDA=OFF -DDYPE_WITH_HIP=ON)
  fi
  echo "== build ($vendor backend, $build)"
  cmake -S . -B "$build" "${flags[@]}" >/dev/null
  cmake --build "$build" -j "$(nproc)" --target unit_test_device_conformance unit_test_gpu_device unit_test_gpu_spmm_shapes \
    "unit_test_${vendor}_launch_plan" unit_test_device_ipc_memory integration_test_gpu_pipeline bench_gpu_kernels bench_gpu_overlap dype-calibrate dype-profile \
    dype-serve dype-client
fi
graphs=$build/graphs
[ -d "$graphs" ] || graphs=${GRAPHS:-/tmp/dype-real-graphs}

echo "== conformance suite and $vendor tests on the real device"
# The conformance suite on this vendor's GPU and the CPU it is checked against, the shared GPU
# backend's cases for this vendor and the vendor's own launch planning. The binaries are run
# directly (not through ctest) so that a prebuilt bundle runs them the same way.
# A hardware test that skips here is a failure of the check: the GPU is present.
log=$(mktemp)
rc=0
run_tests() { "$@" 2>&1 | tee -a "$log"; return "${PIPESTATUS[0]}"; }
run_tests "$build/tests/unit_test_device_conformance" --gtest_filter="*/cpu:*/$vendor" || rc=1
run_tests "$build/tests/unit_test_gpu_device" --gtest_filter="*/$vendor" || rc=1
run_tests "$build/tests/unit_test_gpu_spmm_shapes" --gtest_filter="*/$vendor" || rc=1
run_tests "$build/tests/unit_test_${vendor}_launch_plan" || rc=1
# IPC handles opened by the runtime that has the devices; the other vendor's case is left out (not
# built in a one-vendor build).
other=hip
[[ $vendor == hip ]] && other=cuda
run_tests "$build/tests/unit_test_device_ipc_memory" --gtest_filter="-*${other^}NamesTheFieldAtFault" || rc=1
# Peer copies need two GPUs; one is enough for this check.
skipped=$(grep '^\[  SKIPPED \]' "$log" | grep -v 'PeerCopyBetweenTwoGpus' | grep -v ' ms)$' | grep -c '\.' || true)
grep -h '^\[  PASSED  \]' "$log" || true
rm -f "$log"
if [ "$rc" -ne 0 ]; then echo "gpu_check: FAILED: device tests failed (see above)"; exit 1; fi
if [ "$skipped" -ne 0 ]; then
  echo "gpu_check: FAILED: $skipped device tests skipped although a GPU is present (their skip reasons are above)"
  exit 1
fi

echo "== GCN, GIN and transformer pipelines end to end on the GPU (vs the CPU reference)"
"$build/tests/integration_test_gpu_pipeline" --gtest_brief=0

echo "== library kernels on the GPU vs dype's CPU kernels (measured)"
"$build/bench/bench_gpu_kernels"

echo "== copies beside kernels on the GPU (what transfers: overlap assumes; measured)"
"$build/bench/bench_gpu_overlap"

echo "== the main job: bare dype-serve --mode balanced on this host, GCN 128 -> 128 -> 16 on the Debian dependency graph"
# A failure here fails the check at its end, after the model steps have run too (GPU time is
# scarce). MAIN_JOB_SECS caps the step (it takes about a minute).
main_job=0
deps=$graphs/debian-deps.mtx
if [ ! -s "$deps" ] && [ -z "$bundle" ]; then
  mkdir -p "$graphs"
  /usr/bin/python3 apps/dype-profile/real_graphs.py debian-deps "$deps" || echo "(could not write $deps)"
fi
MAIN_JOB_PYTHON_LD_LIBRARY_PATH=$host_ld_library_path timeout -k 10 "${MAIN_JOB_SECS:-150}" \
  bash scripts/gpu_main_job.sh --bin "$build/apps" --graph "$deps" || main_job=1

if [ "$models" = 1 ]; then
  echo "== calibration of the GPU (dype-calibrate, measured)"
  cal=${MODELS_OUT:-$(mktemp -d /tmp/dype-calibrated.XXXXXX)}
  mkdir -p "$cal"
  "$build/apps/dype-calibrate" --out "$cal" --base-model configs/devices/generic-cpu.yaml --max-mib 256 --reps 5 \
    --power-window 1
  gpu=$(awk '/name:/ {n=$NF} /backend: cuda|backend: hip/ {print n; exit}' "$cal/systems/calibrated.yaml")
  [ -n "$gpu" ] || { echo "gpu_check: FAILED: dype-calibrate wrote no GPU into $cal/systems/calibrated.yaml"; exit 1; }
  for dev in "$gpu" cpu0; do
    budget=${MODELS_BUDGET:-60s}
    if [ "$dev" = cpu0 ]; then
      budget=${CPU_BUDGET:-180}
      budget=${budget%s}s  # 180 and 180s alike
      [ "$budget" = 0s ] && continue
    fi
    echo "== $dev: SpMM and GEMM models (dype-profile run, $budget, measured)"
    # Into $cal/perfmodels/<profile id>.json: the name dype-serve --perfmodels looks for.
    "$build/apps/dype-profile" run --system "$cal/systems/calibrated.yaml" --device "$dev" --kernels spmm,gemm \
      --budget "$budget" --out "$cal/perfmodels/" --quiet
    # shellcheck disable=SC2012  # the newest store is the one just written; ids have no odd characters
    store=$(ls -t "$cal"/perfmodels/*.json | head -1)
    echo "($dev: store $store)"
    # The shipped store of this product, when there is one, beside the fresh profile.
    shipped="configs/perfmodels/$(basename "$store")"
    [ -s "$shipped" ] && [ "$dev" != cpu0 ] || shipped=""
    for g in debian-deps wordnet gcide; do
      [ -s "$graphs/$g.mtx" ] || { echo "($g.mtx not found in $graphs: skipped)"; continue; }
      echo "-- $dev: SpMM on $g (real graph, never profiled; measured vs the model${shipped:+ and the shipped $shipped})"
      # The measured times are kept as CSVs for `dype-profile validate --measured` on any machine.
      "$build/apps/dype-profile" validate "$store" ${shipped:+"$shipped"} --graph "$graphs/$g.mtx" \
        --system "$cal/systems/calibrated.yaml" --device "$dev" --save-measured "$cal/real-graphs/$dev"
    done
  done
fi

if [ "$models" = 1 ]; then echo "gpu_check: calibration and model stores in $cal"; fi
if [ "$main_job" != 0 ]; then
  echo "gpu_check: FAILED: the main job (see '== the main job' above: the plan without the GPU, or answers unlike the reference's)"
  exit 1
fi
echo "gpu_check: passed; every figure above is measured on the GPU named at the top"
