#!/usr/bin/env bash
# Installs the Debian 12 packages the project builds and tests with (as root).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps.sh: run as root (apt-get needs it)" >&2
  exit 1
fi
missing=()
while read -r pkg; do
  [ -z "$pkg" ] && continue
  # Node.js may come from elsewhere (NodeSource bundles npm); keep it.
  if [ "$pkg" = nodejs ] && command -v node >/dev/null; then continue; fi
  if [ "$pkg" = npm ] && command -v npm >/dev/null; then continue; fi
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done < "$here/deps.txt"
if [ ${#missing[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
