#!/usr/bin/env bash
# Installs the Debian packages the test suite needs when they are missing (a fresh machine has none of them).
set -euo pipefail
needed=()
for pkg in "$@"; do
    dpkg -s "$pkg" >/dev/null 2>&1 || needed+=("$pkg")
done
if [ "${#needed[@]}" -gt 0 ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "missing Debian packages: ${needed[*]} (run as root, or install them yourself)" >&2
        exit 1
    fi
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${needed[@]}"
fi
