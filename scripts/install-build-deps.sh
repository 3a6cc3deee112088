#!/usr/bin/env bash
# Installs what building the compiled codec needs when it is missing: a C compiler and the headers of the
# Python that runs the build. Without them the install still works, with the slower pure-Python codec.
set -euo pipefail
python="${1:-python3}"
needed=()
command -v cc >/dev/null 2>&1 || command -v gcc >/dev/null 2>&1 || needed+=(gcc libc6-dev)
include="$("$python" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')"
if [ ! -f "$include/Python.h" ]; then
    version="$("$python" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')"
    needed+=("python${version}-dev")
fi
if [ "${#needed[@]}" -gt 0 ]; then
    bash "$(dirname "$0")/install-system-deps.sh" "${needed[@]}"
fi
