#!/usr/bin/env bash
# Installs exactly the Debian 12 packages dype needs that are missing. Idempotent: a second run
# installs nothing. Usage: scripts/setup.sh
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git curl
  libtbb-dev libeigen3-dev libgtest-dev libgmock-dev libbenchmark-dev libdnnl-dev
  libyaml-cpp-dev nlohmann-json3-dev libcli11-dev libspdlog-dev libfmt-dev
  libsimdjson-dev  # infer request bodies parsed without a document tree (runtime/daemon/kserve/tensor_parse.cpp)
  libucx-dev  # activations between hosts over UCX (runtime/remote/)
  libssl-dev openssl  # dype-serve --tls-cert (HTTPS, gRPC over TLS), dype-client --tls-ca; the CLI makes the tests' certificates
  libboost-dev libcpp-httplib-dev libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc
  libxrt-dev python3 python3-numpy python3-scipy
  coinor-libcbc-dev  # the MILP planner (scheduler/solver/milp.cpp)
  hipcc libamdhip64-dev librocsparse-dev librocm-smi-dev  # HIP/ROCm backend (hw/hip), ~2 GB
  python3-libpysal  # ships virginia_queen.mtx, a real graph the Matrix Market tests read
  # References only, never a runtime dependency: served models are checked against PyTorch
  # (tests/scripts/pyg_reference.py), and the example models are trained on networkx's karate club.
  python3-torch python3-networkx
  python3-matplotlib  # dype-eval's plots (scripts/plot_eval.py)
  python3-grpcio python3-grpc-tools  # the KServe protocol client example and its test (examples/python/)
  # Debian's PyTorch does its dense math through whichever libblas.so.3 is installed; without this
  # it is netlib's reference BLAS (measured 30-60x slower here), which would make every PyTorch peer
  # in bench/ a straw man. OpenBLAS takes over the alternative when installed.
  libopenblas0-pthread
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi

echo "setup: installing ${missing[*]}"
SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
