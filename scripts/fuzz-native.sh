#!/usr/bin/env bash
# Fuzzes the native capture reading path (src/mqttaudit/capture/_native.c) against the pure-Python one with
# bench/fuzz_native.py: installs atheris when missing, builds the extension with AddressSanitizer, UBSan (halting on
# the first error) and gcc's trace-cmp coverage into a copy of the package in a temporary directory (src/ keeps its
# own build), and runs the harness with atheris's libFuzzer and gcc's ASan runtime preloaded. Arguments go to the
# harness: -runs=N (default 200000), --corpus=DIR, --captures=DIR, libFuzzer flags, or crash files to replay. Exits
# 0 when nothing was found. FUZZ_NATIVE_CMP=0 leaves the C comparisons out of the guidance (to compare).
#
# --compiled (first argument): the sanitizer build runs beside the installed package's mypyc-compiled parsers (those
# the audit runs; a compiled module takes only the types it declares) instead of the source tree's pure-Python ones.
# atheris then sees no Python coverage in the compiled modules: the search is guided by the driver's and the reading
# stage's Python code and the C comparisons, so the pure run (the default) is the one that explores; this one checks
# the pair the audit really runs.
set -euo pipefail
cd "$(dirname "$0")/.."

python=${PYTHON:-.venv/bin/python}
if ! "$python" -c "import atheris" 2>/dev/null; then
    "$python" -m pip install --quiet 'atheris>=2.3,<3'
fi

compiled=0
if [ "${1:-}" = --compiled ]; then
    compiled=1
    shift
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/fuzz-native-build.XXXXXX")
trap 'rm -rf "$work"' EXIT
if [ "$compiled" = 1 ]; then
    mkdir -p "$work/extension"
    target=$work/extension
    path=${PYTHONPATH:-}
    export FUZZ_NATIVE_EXTENSION=$target
else
    cp -r src/mqttaudit "$work/"
    find "$work" -name __pycache__ -prune -exec rm -rf {} +
    rm -f "$work"/mqttaudit/capture/_native.*.so
    target=$work/mqttaudit/capture
    path=$work
fi

coverage=-fsanitize-coverage=trace-cmp
if [ "${FUZZ_NATIVE_CMP:-1}" = 0 ]; then
    coverage=
fi
include=$("$python" -c "import sysconfig; print(sysconfig.get_paths()['include'])")
suffix=$("$python" -c "import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX'))")

gcc -shared -fPIC -g -O1 -fno-omit-frame-pointer -fsanitize=address,undefined \
    $coverage -I"$include" src/mqttaudit/capture/_native.c -o "$target/_native$suffix"

# atheris's libFuzzer first, then gcc's ASan runtime: both runtimes define the __sanitizer_cov_* callbacks (ASan's
# are weak no-ops) and the first loaded wins, for the extension's trace-cmp calls and for atheris's own Python
# coverage alike. ASan does not come first then, which it accepts with verify_asan_link_order=0 (its interceptors
# still precede libc; the libFuzzer library defines no allocator).
libfuzzer=$("$python" -c "import atheris, pathlib; print(next(pathlib.Path(atheris.__file__).parent.glob('core_with_libfuzzer*.so')))")

# PYTHONMALLOC=malloc: Python's own allocator would hide the extension's small buffers from ASan. abort_on_error:
# UBSan then dies by SIGABRT, which libFuzzer catches to save the input (UBSan's own exit would lose it).
LD_PRELOAD="$libfuzzer:$(gcc -print-file-name=libasan.so)" \
    ASAN_OPTIONS=detect_leaks=0:verify_asan_link_order=0 \
    UBSAN_OPTIONS=halt_on_error=1:abort_on_error=1:print_stacktrace=1 \
    PYTHONMALLOC=malloc \
    PYTHONPATH="$path" \
    "$python" bench/fuzz_native.py "$@"
