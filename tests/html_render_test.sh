#!/usr/bin/env bash
# Renders a sample load-generator report in headless Chromium: the page must
# load without console errors and its DOM must hold the four plots with data.
# Usage: html_render_test.sh LOADGEN_TEST_BINARY CHROMIUM
set -euo pipefail
bin="$1"
chromium="${2:-}"
if [ -z "$chromium" ] || [ ! -x "$chromium" ]; then
  if [ "${PROMPTCACHE_REQUIRE_SHARED:-}" = 1 ]; then echo "chromium not installed" >&2; exit 1; fi
  echo "SKIP: chromium not installed (apt-get install chromium)"; exit 77
fi
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
PROMPTCACHE_SAMPLE_REPORT="$dir/report.html" "$bin" --gtest_filter=LoadgenReport.HtmlHasFourPlots >/dev/null
flags=(--headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking
       --disable-component-update --disable-sync --user-data-dir="$dir/profile" --enable-logging=stderr --v=0)
timeout 60 "$chromium" "${flags[@]}" --dump-dom "file://$dir/report.html" >"$dir/dom.html" 2>"$dir/log.txt" || true
for id in ttft-cdf itl-cdf ttft-vs-cached itl-vs-context; do
  grep -q "id=\"$id\"" "$dir/dom.html" || { echo "plot $id missing from the rendered DOM" >&2; cat "$dir/log.txt" >&2; exit 1; }
done
n=$(grep -o '<polyline class="series"\|<circle class="series"' "$dir/dom.html" | wc -l)
[ "$n" -ge 40 ] || { echo "only $n plotted series elements" >&2; exit 1; }
if grep -i "CONSOLE.*error\|Uncaught" "$dir/log.txt" >&2; then echo "console errors while rendering" >&2; exit 1; fi
timeout 60 "$chromium" "${flags[@]}" --window-size=1300,1100 --screenshot="$dir/shot.png" "file://$dir/report.html" 2>/dev/null || true
[ -s "$dir/shot.png" ] || { echo "no screenshot" >&2; exit 1; }
echo "rendered: $n plotted elements in 4 plots, no console errors, screenshot $(stat -c %s "$dir/shot.png") bytes"
