#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine and passes the tests: installs what is missing, configures the
# `ci` preset (release build, warnings are errors), builds everything and runs ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
jobs=$(nproc)
cmake --preset ci
cmake --build --preset ci -j "$jobs"
ctest --preset ci -j "$jobs"
