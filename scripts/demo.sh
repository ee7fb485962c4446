#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine and runs the main job.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)" --target dype-demo
./build/release/apps/dype-demo --system configs/systems/paper-testbed-pcie4.yaml "$@"
