#!/usr/bin/env bash
# One command on a fresh Debian 12 machine (as root): install dependencies,
# build in Release, and run the main job (`promptcache demo`), which makes the
# default benchmark model once (cached under ~/.cache/promptcache) and shows
# prefill and decode speed.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build build
./build/promptcache demo "$@"
