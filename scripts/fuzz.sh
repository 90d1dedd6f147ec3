#!/usr/bin/env bash
# Builds the libFuzzer targets (clang 14, ASan + UBSan) into build-fuzz/ and
# runs each for SECONDS (default 60) from its seed corpus in fuzz/corpus/.
# A crash stops with the reproducer under build-fuzz/crashes/TARGET/ and a
# non-zero exit; what the fuzzer finds new is kept in build-fuzz/corpus/.
#   scripts/fuzz.sh [SECONDS] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(fuzz_http_request fuzz_gguf fuzz_tokenizer fuzz_disk_segment fuzz_redis_payload fuzz_chat_template)
jobs="${JOBS:-$(nproc)}"
CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPROMPTCACHE_FUZZ=ON \
  -DPROMPTCACHE_BUILD_TESTS=OFF -DPROMPTCACHE_BUILD_BENCH=OFF >/dev/null
cmake --build build-fuzz -j "$jobs" --target "${targets[@]}"
export ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
run_one() {  # TARGET -> build-fuzz/TARGET.result
  local t=$1 log="build-fuzz/$1.log"
  mkdir -p "build-fuzz/corpus/$t" "build-fuzz/crashes/$t"
  # -rss_limit_mb: a hostile input must not be able to take the machine's memory either.
  if build-fuzz/fuzz/$t "build-fuzz/corpus/$t" "fuzz/corpus/$t" -max_total_time="$seconds" -rss_limit_mb=2048 \
       -timeout=10 -artifact_prefix="build-fuzz/crashes/$t/" -print_final_stats=1 >"$log" 2>&1; then
    echo "$t: $(sed -n 's/^stat::number_of_executed_units: *//p' "$log") executions in ${seconds} s, no crash" >"build-fuzz/$t.result"
  else
    echo "$t: FAILED (see $log and build-fuzz/crashes/$t/)" >"build-fuzz/$t.result"
  fi
}
# As many targets at once as there are cores.
running=0
for t in "${targets[@]}"; do
  run_one "$t" &
  running=$((running + 1))
  if [ "$running" -ge "$jobs" ]; then wait -n || true; running=$((running - 1)); fi
done
wait
status=0
for t in "${targets[@]}"; do
  cat "build-fuzz/$t.result"
  if grep -q FAILED "build-fuzz/$t.result"; then status=1; tail -40 "build-fuzz/$t.log" >&2; fi
done
exit $status
