#!/usr/bin/env bash
# Installs what the audit benchmark compares against when it is missing: tshark (Debian package). Its
# wireshark-common dependency asks whether non-root users may capture; the answer is preset to "no" so the
# install never stops at a prompt. scapy comes from pip with the bench extra. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

if command -v tshark >/dev/null 2>&1; then
    exit 0
fi
if [ "$(id -u)" -eq 0 ]; then
    echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections
fi
bash scripts/install-system-deps.sh tshark
