#!/usr/bin/env bash
# Builds (Release, warnings as errors) and runs the whole test suite under
# CTest. With --asan, also builds and runs everything under
# AddressSanitizer + UndefinedBehaviorSanitizer in build-asan/. With
# --fuzz SECONDS, also runs every libFuzzer target that long (scripts/fuzz.sh).
#   scripts/test.sh [--asan] [--fuzz SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
asan=0
fuzz_seconds=0
while [ $# -gt 0 ]; do
  case "$1" in
    --asan) asan=1 ;;
    --fuzz) fuzz_seconds="$2"; shift ;;
    *) echo "test.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
jobs="${JOBS:-$(nproc)}"
# Test setup for the client-compatibility tests: the openai npm package,
# pinned by tests/node/package-lock.json.
if command -v npm >/dev/null && [ ! -d tests/node/node_modules/openai ]; then
  (cd tests/node && npm ci --no-audit --no-fund) || echo "test.sh: npm ci failed; the Node client tests will skip or fail" >&2
fi
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DPROMPTCACHE_WERROR=ON
cmake --build build -j "$jobs"
(cd build && ctest --output-on-failure -j "$jobs")
if [ "$asan" = 1 ]; then
  cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPROMPTCACHE_WERROR=ON \
    -DPROMPTCACHE_SANITIZE=ON -DPROMPTCACHE_BUILD_BENCH=OFF
  cmake --build build-asan -j "$jobs"
  (cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --output-on-failure -j "$jobs")
fi
if [ "$fuzz_seconds" -gt 0 ]; then
  scripts/fuzz.sh "$fuzz_seconds"
fi
