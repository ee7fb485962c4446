#!/usr/bin/env bash
# Packs what scripts/gpu_check.sh needs on a GPU machine that cannot install packages or reach a
# package registry: builds the CUDA backend here (warnings as errors, the same flags as the check),
# and writes build/gpu-bundle.tar.xz with the test, bench and app binaries (stripped, in the build
# tree's layout; the check reads configs/ from the repository), dype-serve and dype-client for the
# check's main job, the Debian shared libraries they load that a CUDA machine need not have (gRPC,
# protobuf, yaml-cpp, spdlog, UCX, ...; the CUDA libraries and the C/C++ runtime are left to the
# GPU machine), and the real graphs of bench/validate_real_graphs.sh. On the GPU machine:
#
#   bash scripts/gpu_check.sh --bundle build/gpu-bundle.tar.xz [--models]
#
#   bash scripts/gpu_bundle.sh        # needs scripts/setup.sh's packages and nvcc (/usr/local/cuda)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
build=build/gpu-check
stage=build/gpu-bundle
targets=(tests/unit_test_device_conformance tests/unit_test_gpu_device tests/unit_test_cuda_launch_plan
         tests/unit_test_gpu_spmm_shapes tests/unit_test_device_ipc_memory
         tests/integration_test_gpu_pipeline bench/bench_gpu_kernels bench/bench_gpu_overlap apps/dype-calibrate
         apps/dype-profile apps/dype-serve apps/dype-client)

cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDYPE_WERROR=ON -DDYPE_BUILD_BENCH=ON \
  -DDYPE_WITH_CUDA=ON -DDYPE_WITH_HIP=OFF -DDYPE_WITH_XRT=OFF >/dev/null
cmake --build "$build" -j "$(nproc)" --target "${targets[@]##*/}"

rm -rf "$stage" && mkdir -p "$stage/lib" "$stage/graphs"
for t in "${targets[@]}"; do
  mkdir -p "$stage/$(dirname "$t")"
  strip -o "$stage/$t" "$build/$t"
done
# Libraries the GPU machine provides itself: the C/C++ runtime and the CUDA toolkit's.
provided='^(libc|libm|libdl|librt|libpthread|libstdc\+\+|libgcc_s|ld-linux-x86-64|libcuda|libcudart|libcublas|libcublasLt|libcusparse|libnvJitLink)\.so'
for t in "${targets[@]}"; do ldd "$build/$t"; done | awk '$3 ~ /^\// {print $3}' | sort -u | while read -r lib; do
  if ! basename "$lib" | grep -Eq "$provided"; then cp -L "$lib" "$stage/lib/"; fi
done
# The real graphs (Debian packages' data, converted here where the packages install).
graphs=${GRAPHS:-/tmp/dype-real-graphs}
for g in debian-deps wordnet gcide; do
  if [[ ! -s "$graphs/$g.mtx" ]]; then
    mkdir -p "$graphs"
    [[ -f /usr/share/wordnet/data.noun && -f /usr/share/dictd/gcide.index ]] ||
      { apt-get update -qq && apt-get install -y -qq wordnet-base dict-gcide >/dev/null; }
    /usr/bin/python3 "$root/apps/dype-profile/real_graphs.py" "$g" "$graphs/$g.mtx"
  fi
  cp "$graphs/$g.mtx" "$stage/graphs/"
done
tar -C "$stage" -cf - . | xz -T0 -6 > build/gpu-bundle.tar.xz
echo "gpu_bundle: build/gpu-bundle.tar.xz, $(du -h build/gpu-bundle.tar.xz | cut -f1)"
(cd "$stage" && du -sh lib tests bench apps graphs)
