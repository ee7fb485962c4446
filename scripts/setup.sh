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
  python3-matplotlib  # every plot: dype-eval's figures and dype-profile --plot (scripts/plot_*.py)
  python3-grpcio python3-grpc-tools  # the KServe protocol client example and its test (examples/python/)
  prometheus  # a real Prometheus scraping dype-serve, and promtool (tests/e2e/test_monitoring.cpp)
  # Debian's PyTorch does its dense math through whichever libblas.so.3 is installed; without this
  # it is netlib's reference BLAS (measured 30-60x slower here), which would make every PyTorch peer
  # in bench/ a straw man. OpenBLAS takes over the alternative when installed.
  libopenblas0-pthread
  chromium  # the status page's browser test (tests/e2e/status_page_browser.py), headless
)
# npm fetches the status page's chart library (below); Debian's npm brings nodejs. A node from
# elsewhere that ships its own npm is used as it is.
if ! command -v npm >/dev/null 2>&1; then packages+=(npm); fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "setup: all ${#packages[@]} packages present"
else
  echo "setup: installing ${missing[*]}"
  SUDO=""
  if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
  # Debian's prometheus starts a server on :9090 at install where systemd runs, which would keep
  # scraping and storing on every CI machine; the tests start their own, so the one just installed
  # is stopped and disabled (one installed before is left as it was).
  if [[ " ${missing[*]} " == *" prometheus "* && -d /run/systemd/system ]]; then
    $SUDO systemctl disable --now prometheus >/dev/null 2>&1 || true
  fi
fi

# npm packages the build embeds (the status page's chart library): each tarball at the version
# pinned in third_party/npm-packages.lock, fetched once into third_party/npm/ and checked against
# the pinned integrity; the build then needs no network.
root="$(cd "$(dirname "$0")/.." && pwd)"
vendor="$root/third_party/npm"
mkdir -p "$vendor"
while read -r name version integrity _; do
  [[ -z "$name" || "$name" == \#* ]] && continue
  tgz="$vendor/$name-$version.tgz"
  if [[ ! -s "$tgz" ]]; then
    echo "setup: npm pack $name@$version"
    (cd "$vendor" && npm pack --silent "$name@$version" >/dev/null)
  fi
  got="sha512-$(openssl dgst -sha512 -binary "$tgz" | base64 -w0)"
  if [[ "$got" != "$integrity" ]]; then
    rm -f "$tgz"
    echo "setup: $name-$version.tgz does not match its pinned integrity ($got)" >&2
    exit 1
  fi
done < "$root/third_party/npm-packages.lock"
echo "setup: npm packages in third_party/npm/ match third_party/npm-packages.lock"
