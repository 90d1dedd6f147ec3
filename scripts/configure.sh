#!/usr/bin/env bash
# Configures one of the project's two build trees with the flags every script
# shares, so that setup.sh, test.sh and fuzz.sh never rebuild a tree for a
# flag another script set differently.
#   scripts/configure.sh release   -> build/      g++, Release, warnings as errors
#   scripts/configure.sh sanitize  -> build-san/  clang++, ASan + UBSan, and
#       libFuzzer coverage so the fuzz targets (fuzz/) build in the same tree
#       as the sanitizer test suite: one instrumented build of the libraries,
#       not two. -O1 with line tables only: the sanitizers need no more to
#       report a file and line, and full debug info doubled the compile time.
# A compiler cache (ccache, when installed) keeps objects between runs on one
# machine; paths are taken relative to the checkout so that two clones share it.
set -euo pipefail
cd "$(dirname "$0")/.."
tree="${1:?usage: scripts/configure.sh release|sanitize}"
launcher=()
if command -v ccache >/dev/null; then
  # base_dir: paths under the checkout hashed as relative ones; nohashdir:
  # the build folder's absolute path (in line tables) not part of the key.
  cache="env;CCACHE_BASEDIR=$PWD;CCACHE_NOHASHDIR=1;ccache"
  launcher=("-DCMAKE_C_COMPILER_LAUNCHER=$cache" "-DCMAKE_CXX_COMPILER_LAUNCHER=$cache")
fi
case "$tree" in
  release)
    cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DPROMPTCACHE_WERROR=ON "${launcher[@]}" >/dev/null
    ;;
  sanitize)
    cmake -S . -B build-san -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
      -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -gline-tables-only" \
      "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -gline-tables-only" \
      -DPROMPTCACHE_WERROR=ON -DPROMPTCACHE_SANITIZE=ON -DPROMPTCACHE_FUZZ=ON -DPROMPTCACHE_BUILD_BENCH=OFF \
      "${launcher[@]}" >/dev/null
    ;;
  *) echo "configure.sh: unknown tree '$tree' (release or sanitize)" >&2; exit 2 ;;
esac
