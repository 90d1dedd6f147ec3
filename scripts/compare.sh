#!/usr/bin/env bash
# Side-by-side speed against the reference engine (../shared/anchor), on the
# same files, in one run on this machine.
#
#   scripts/compare.sh models [-r REPS] [TYPE...]
#       bench-135m made in each weight type (default: every type make-model
#       writes); per type promptcache bench-model and the reference's
#       llama-bench, run alternately: pp512 and tg128 tokens/s and the ratios.
#       Prints a Markdown table.
#
# Needs build/promptcache (scripts/setup.sh or scripts/test.sh builds it).
# Models are made once into ~/.cache/promptcache. 2 threads each.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=build/promptcache
anchor=../shared/anchor
cache="${PROMPTCACHE_CACHE:-$HOME/.cache/promptcache}"
[ -x "$bin" ] || { echo "compare.sh: build first ($bin missing)" >&2; exit 1; }
[ -x "$anchor/llama-bench" ] || { echo "compare.sh: $anchor/llama-bench not found" >&2; exit 1; }
mkdir -p "$cache"

model_for() {  # TYPE -> path, made once
  local f="$cache/bench-135m-$1.gguf"
  [ -f "$f" ] || "$bin" make-model --shape bench-135m --type "$1" -o "$f" >&2
  echo "$f"
}

ours() {  # FILE REPS -> "pp tg" tok/s
  "$bin" bench-model -m "$1" -p 512 -n 128 -r "$2" -t 2 --json |
    python3 -c 'import json,sys; j=json.load(sys.stdin); print(round(j["pp"]["tok_s_mean"],1), round(j["tg"]["tok_s_mean"],1))'
}

theirs() {  # FILE REPS -> "pp tg" tok/s
  "$anchor/llama-bench" -m "$1" -t 2 -p 512 -n 128 -r "$2" -o json 2>/dev/null |
    python3 -c 'import json,sys; r={(x["n_prompt"]>0): x["avg_ts"] for x in json.load(sys.stdin)}; print(round(r[True],1), round(r[False],1))'
}

models() {
  local reps=3
  if [ "${1:-}" = "-r" ]; then reps=$2; shift 2; fi
  local types=("$@")
  [ ${#types[@]} -gt 0 ] || types=(f16 q8_0 q4_0 q4_1 q5_0 q5_1 iq4_nl q2_k q3_k q4_k q4_k_m q5_k q5_k_m q6_k iq4_xs)
  echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; flags: $(grep -o -w 'avx512_vnni\|avx512_bf16\|amx_int8\|avx_vnni\|avx2' /proc/cpuinfo | sort -u | tr '\n' ' ')"
  echo
  echo "| type | file MB | pp512 ours | pp512 reference | ratio | tg128 ours | tg128 reference | ratio |"
  echo "|---|---:|---:|---:|---:|---:|---:|---:|"
  for t in "${types[@]}"; do
    local f; f=$(model_for "$t")
    local mb; mb=$(( $(stat -c %s "$f") / 1000000 ))
    read -r our_pp our_tg < <(ours "$f" "$reps")
    read -r ref_pp ref_tg < <(theirs "$f" "$reps")
    python3 -c "import sys; t,mb,a,b,c,d=sys.argv[1:]; a,b,c,d=map(float,(a,b,c,d)); print(f'| {t} | {mb} | {a:,.0f} | {b:,.0f} | {a/b:.2f}x | {c:,.0f} | {d:,.0f} | {c/d:.2f}x |')" \
      "$t" "$mb" "$our_pp" "$ref_pp" "$our_tg" "$ref_tg"
  done
}

case "${1:-}" in
  models) shift; models "$@" ;;
  *) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
