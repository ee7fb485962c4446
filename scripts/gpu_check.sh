#!/usr/bin/env bash
# The hardware check for a machine with an NVIDIA or AMD GPU: builds the GPU backend (CUDA or HIP,
# warnings as errors), runs the device conformance suite and the vendor tests on the real GPU, a
# GCN/GIN/transformer pipeline end to end against the CPU reference, and the library kernels
# (cuSPARSE/cuBLAS or rocSPARSE/own GEMM) against dype's CPU kernels. Every figure it prints is
# measured on the GPU it names. On a machine without a GPU it says so and exits 0.
#
#   bash scripts/gpu_check.sh            # installs what is missing first (scripts/setup.sh)
#   DYPE_SKIP_SETUP=1 bash scripts/gpu_check.sh   # packages already there (offline GPU machines)
set -euo pipefail
cd "$(dirname "$0")/.."

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

if [ "${DYPE_SKIP_SETUP:-0}" != 1 ]; then bash scripts/setup.sh; fi

build=build/gpu-check
jobs=$(nproc)
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
cmake --build "$build" -j "$jobs"

echo "== conformance suite and $vendor tests on the real device"
# A hardware test that skips here is a failure of the check: the GPU is present.
log=$(mktemp)
set +e
# The conformance suite on this vendor's GPU and the CPU it is checked against, the shared GPU
# backend's cases for this vendor, the vendor's own tests, and the pipelines end to end.
ctest --test-dir "$build" -R "DeviceConformance\..*/(cpu|${vendor}) |GpuDevice\..*/${vendor} |test_${vendor}_|gpu_pipeline" \
  --output-on-failure -j "$jobs" | tee "$log"
rc=${PIPESTATUS[0]}
set -e
# Peer copies need two GPUs; one is enough for this check.
skipped=$(grep 'Skipped' "$log" | grep -vc 'PeerCopyBetweenTwoGpus' || true)
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

echo "gpu_check: passed; every figure above is measured on the GPU named at the top"
