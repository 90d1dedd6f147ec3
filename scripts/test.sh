#!/usr/bin/env bash
# Builds (Release, warnings as errors) and runs the whole test suite under
# CTest, in the build/ tree that scripts/setup.sh made (same flags: nothing is
# rebuilt for a flag).
#   --asan          also the sanitizer suite: build-san/ (clang, ASan + UBSan)
#                   and every test there; the model-parity cases run at this
#                   CPU's best instruction-set level only, on the first
#                   reference prompt of each file (the Release suite runs
#                   every level and prompt), unless --full.
#   --fuzz SECONDS  also every libFuzzer target that long (scripts/fuzz.sh),
#                   built in the same build-san/ tree.
#   --full          every reference prompt at every level in both trees: the
#                   Release suite runs two prompts per file at the scalar level
#                   (the portable fallback) and all of them at each SIMD level;
#                   the sanitizer suite as above.
# Prints each stage's wall time, and a table of them at the end (CI's log).
#   scripts/test.sh [--asan] [--fuzz SECONDS] [--full]
set -euo pipefail
cd "$(dirname "$0")/.."
asan=0
full=0
fuzz_seconds=0
while [ $# -gt 0 ]; do
  case "$1" in
    --asan) asan=1 ;;
    --full) full=1 ;;
    --fuzz) fuzz_seconds="$2"; shift ;;
    *) echo "test.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
jobs="${JOBS:-$(nproc)}"

stage_names=()
stage_secs=()
print_stages() {
  [ ${#stage_names[@]} -gt 0 ] || return 0
  echo "test.sh: stage times (wall, $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'))"
  local i
  for i in "${!stage_names[@]}"; do printf '  %-28s %5d s\n' "${stage_names[$i]}" "${stage_secs[$i]}"; done
}
trap print_stages EXIT
# stage NAME COMMAND...: runs it and records its wall time.
stage() {
  local name=$1 t0=$SECONDS
  shift
  echo "test.sh: stage '$name' starts"
  "$@"
  stage_names+=("$name")
  stage_secs+=($((SECONDS - t0)))
  echo "test.sh: stage '$name' took $((SECONDS - t0)) s"
}

# Test setup for the client-compatibility tests: the openai npm package,
# pinned by tests/node/package-lock.json.
node_setup() {
  if command -v npm >/dev/null && [ ! -d tests/node/node_modules/openai ]; then
    (cd tests/node && npm ci --no-audit --no-fund) ||
      echo "test.sh: npm ci failed; the Node client tests will skip or fail" >&2
  fi
}
build_release() {
  scripts/configure.sh release
  cmake --build build -j "$jobs"
}
ctest_in() {  # TREE [ctest args...]
  local tree=$1
  shift
  (cd "$tree" && ctest --output-on-failure -j "$jobs" "$@")
}
build_sanitize() {
  scripts/configure.sh sanitize
  cmake --build build-san -j "$jobs"
}

# --full: every parity prompt at every level, in both trees.
if [ "$full" = 1 ]; then export PROMPTCACHE_PARITY_ALL_ISAS=1 PROMPTCACHE_PARITY_ALL_CASES=1; fi
stage "node test setup" node_setup
stage "release build" build_release
stage "release tests" ctest_in build
if [ "$asan" = 1 ]; then
  stage "sanitizer build" build_sanitize
  export ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1
  stage "sanitizer tests" ctest_in build-san
fi
if [ "$fuzz_seconds" -gt 0 ]; then
  stage "fuzz ${fuzz_seconds} s per target" scripts/fuzz.sh "$fuzz_seconds"
fi
