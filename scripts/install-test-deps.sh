#!/usr/bin/env bash
# Installs what the broker tests need when it is missing: mosquitto and tcpdump from Debian, node and npm, and the
# aedes npm package in .node/ (git ignores it). amqtt comes from pip with the test extra.
set -euo pipefail
cd "$(dirname "$0")/.."

AEDES_VERSION=1.2.0

debian=(mosquitto tcpdump)
command -v node >/dev/null 2>&1 || debian+=(nodejs)
command -v npm >/dev/null 2>&1 || debian+=(npm)

# Debian's postinst starts the mosquitto daemon where it can; policy-rc.d refuses that while we install.
if ! dpkg -s mosquitto >/dev/null 2>&1 && [ ! -e /usr/sbin/policy-rc.d ] && [ "$(id -u)" -eq 0 ]; then
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
    chmod +x /usr/sbin/policy-rc.d
    trap 'rm -f /usr/sbin/policy-rc.d' EXIT
fi
bash scripts/install-system-deps.sh "${debian[@]}"

if [ -s /run/mosquitto/mosquitto.pid ] && kill -0 "$(cat /run/mosquitto/mosquitto.pid)" 2>/dev/null; then
    echo "a mosquitto daemon is running (pid $(cat /run/mosquitto/mosquitto.pid)); the tests start their own" >&2
fi

# aedes 1.x declares node >= 20; Debian 12's own nodejs is 18.
if [ "$(node -p 'process.versions.node.split(".")[0]')" -lt 20 ]; then
    echo "aedes $AEDES_VERSION needs node >= 20, found $(node --version)" >&2
    exit 1
fi
installed=$(node -p "require('./.node/node_modules/aedes/package.json').version" 2>/dev/null || true)
if [ "$installed" != "$AEDES_VERSION" ]; then
    npm install --prefix .node --no-audit --no-fund --no-save --loglevel=error "aedes@$AEDES_VERSION"
fi
