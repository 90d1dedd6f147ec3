#!/usr/bin/env bash
# One command on a fresh Debian 12 machine (as root): install dependencies,
# build in Release, and run the main job (`promptcache demo`), which makes the
# default benchmark model once (cached under ~/.cache/promptcache) and shows
# prefill and decode speed.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/configure.sh release  # the flags scripts/test.sh builds with: no rebuild there
cmake --build build
./build/promptcache demo "$@"
