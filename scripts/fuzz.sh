#!/usr/bin/env bash
# Builds the libFuzzer targets (clang 14, ASan + UBSan) in the sanitizer tree
# build-san/ (scripts/configure.sh sanitize: the tree scripts/test.sh --asan
# tests in, so CI instruments the libraries once) and runs each for SECONDS
# (default 60) from its seed corpus in fuzz/corpus/. A crash stops with the
# reproducer under build-san/crashes/TARGET/ and a non-zero exit; what the
# fuzzer finds new is kept in build-san/corpus/.
#   scripts/fuzz.sh [SECONDS] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(fuzz_http_request fuzz_gguf fuzz_tokenizer fuzz_disk_segment fuzz_redis_payload fuzz_chat_template fuzz_json_schema)
jobs="${JOBS:-$(nproc)}"
scripts/configure.sh sanitize
cmake --build build-san -j "$jobs" --target "${targets[@]}"
export ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
run_one() {  # TARGET -> build-san/TARGET.result
  local t=$1 log="build-san/$1.log"
  mkdir -p "build-san/corpus/$t" "build-san/crashes/$t"
  # -rss_limit_mb: a hostile input must not be able to take the machine's memory either.
  # -timeout (the hang detector, per input): 300 s. A seed that drives a
  # template to the interpreter's 250,000-step budget in every render (the
  # load-time probe renders and the three calls) renders in under 0.5 s in
  # Release but 17-25 s in this instrumented tree on a 2-core Zen 5 (ASan's
  # allocator and the comparison tracing) and 82 s alone on a Zen 3, which
  # OSS-Fuzz's 25 s would report as a hang.
  if build-san/fuzz/$t "build-san/corpus/$t" "fuzz/corpus/$t" -max_total_time="$seconds" -rss_limit_mb=2048 \
       -timeout=300 -artifact_prefix="build-san/crashes/$t/" -print_final_stats=1 >"$log" 2>&1; then
    echo "$t: $(sed -n 's/^stat::number_of_executed_units: *//p' "$log") executions in ${seconds} s, no crash" >"build-san/$t.result"
  else
    echo "$t: FAILED (see $log and build-san/crashes/$t/)" >"build-san/$t.result"
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
  cat "build-san/$t.result"
  if grep -q FAILED "build-san/$t.result"; then status=1; tail -40 "build-san/$t.log" >&2; fi
done
exit $status
