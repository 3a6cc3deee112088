#!/usr/bin/env bash
# Installs what the broker tests need when it is missing: mosquitto, its clients (mosquitto_pub, mosquitto_sub), its
# plugin headers (mosquitto-dev) and gcc, which build the test plugin that gives mosquitto an enhanced authentication
# method, rabbitmq-server and tcpdump from Debian, node and npm, and the aedes and mqtt (MQTT.js) npm packages in .node/ (git ignores it).
# amqtt and mqttools (an MQTT 5.0 broker) come from pip with the test extra. The tests start every broker themselves,
# on free ports of 127.0.0.1; no daemon is started here.
set -euo pipefail
cd "$(dirname "$0")/.."

# MQTT.js, the client the serve tests drive with node.
MQTTJS_VERSION=5.16.0
AEDES_VERSION=1.2.0

daemons=(mosquitto rabbitmq-server)
debian=("${daemons[@]}" mosquitto-clients mosquitto-dev tcpdump)
debian+=(chromium)  # renders the audit's report.html headless in tests/test_report_browser.py
command -v gcc >/dev/null 2>&1 || debian+=(gcc)
command -v node >/dev/null 2>&1 || debian+=(nodejs)
command -v npm >/dev/null 2>&1 || debian+=(npm)

# Debian's postinst scripts start these daemons where they can (rabbitmq-server's fails the install when its daemon
# does not start); policy-rc.d refuses that while we install, and invoke-rc.d then exits 0.
missing_daemon=false
for pkg in "${daemons[@]}"; do
    dpkg -s "$pkg" >/dev/null 2>&1 || missing_daemon=true
done
if $missing_daemon && [ ! -e /usr/sbin/policy-rc.d ] && [ "$(id -u)" -eq 0 ]; then
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
    chmod +x /usr/sbin/policy-rc.d
    trap 'rm -f /usr/sbin/policy-rc.d' EXIT
fi
bash scripts/install-system-deps.sh "${debian[@]}"

if [ -s /run/mosquitto/mosquitto.pid ] && kill -0 "$(cat /run/mosquitto/mosquitto.pid)" 2>/dev/null; then
    echo "a mosquitto daemon is running (pid $(cat /run/mosquitto/mosquitto.pid)); the tests start their own" >&2
fi
# The default AMQP and epmd ports: the tests use neither, so a daemon there is someone else's.
for port in 5672 4369; do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
        echo "something listens on port $port (a rabbitmq or epmd daemon?); the tests start their own elsewhere" >&2
    fi
done

# aedes 1.x declares node >= 20; Debian 12's own nodejs is 18.
if [ "$(node -p 'process.versions.node.split(".")[0]')" -lt 20 ]; then
    echo "aedes $AEDES_VERSION needs node >= 20, found $(node --version)" >&2
    exit 1
fi
version_of() { node -p "require('./.node/node_modules/$1/package.json').version" 2>/dev/null || true; }
if [ "$(version_of aedes)" != "$AEDES_VERSION" ] || [ "$(version_of mqtt)" != "$MQTTJS_VERSION" ]; then
    npm install --prefix .node --no-audit --no-fund --no-save --loglevel=error "aedes@$AEDES_VERSION" \
        "mqtt@$MQTTJS_VERSION"
fi
