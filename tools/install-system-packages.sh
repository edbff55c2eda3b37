#!/usr/bin/env bash
# Install the Debian packages listed in system-packages.txt that are not installed yet.
# They hold the offline data the curve generator trains on (and that the bank-regeneration test reads).
# Without apt-get or root it prints what is missing and how to install it, and exits non-zero.
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t wanted < <(grep -v '^\s*#' system-packages.txt | tr -s ' \t' '\n' | grep -v '^$')
missing=()
for pkg in "${wanted[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if ! command -v apt-get >/dev/null 2>&1; then
    echo "error: missing system packages: ${missing[*]} (no apt-get here; install them with your package manager)" >&2
    exit 1
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then sudo="sudo"; else
        echo "error: missing system packages: ${missing[*]}; run as root: apt-get update && apt-get install -y ${missing[*]}" >&2
        exit 1
    fi
fi
echo "installing system packages: ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
