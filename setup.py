"""Build hook: the hot modules (codec, capture reading and reassembly, judge) are compiled to C with mypyc (the same
source also runs as pure Python).

The compiled build is the default. Set ``MQTTAUDIT_PURE_PYTHON=1`` to skip it; when mypyc or a C compiler is
missing, the build warns and installs the pure-Python codec, which behaves the same, only slower.
"""

from __future__ import annotations

import os
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

# The modules on the decoding path. errors.py stays pure Python so that user code may subclass its exceptions.
CODEC = [
    f"src/mqttaudit/codec/{name}.py"
    for name in (
        "buffer",
        "decoder",
        "encoder",
        "packets",
        "properties",
        "readers",
        "reason_codes",
        "remaining_length",
        "rules",
        "stream",
        "validators",
        "version",
        "writers",
    )
]
# The capture layer's reading, reassembly and framing (its chunk descriptors stay pure Python: they are pickled
# from the driver to Spark's workers), and the judge with its broker model and routing replay (its rule table is
# built from the module's own names at import). Its events and transcripts, which travel from the judging stage to
# the routing replay pickled, pickle by position (__reduce__), which the compiled classes support.
CAPTURE = [
    f"src/mqttaudit/capture/{name}.py"
    for name in (
        "conversation",
        "detect",
        "flows",
        "link",
        "pcap",
        "pcapng",
        "reader",
        "reassembly",
        "resync",
        "segments",
    )
]
JUDGE = [
    f"src/mqttaudit/judge/{name}.py"
    for name in (
        "config",
        "connection",
        "context",
        "conversation",
        "deliveries",
        "deliveries_5",
        "events",
        "expiry_5",
        "forwarding_5",
        "handshake_5",
        "keepalive",
        "lifecycle",
        "limits",
        "model",
        "obligations",
        "omitted_5",
        "outcomes",
        "pairing",
        "routing",
        "sides",
        "stream",
        "subscriptions",
        "topic_alias",
        "transcript",
        "verdict",
        "violations",
    )
]
# The audit's per-connection glue: the judge's findings and each packet as table rows (once per packet), and the
# replay's rows (once per expectation).
PIPELINE = [f"src/mqttaudit/pipeline/{name}.py" for name in ("conversations", "replay")]
# Topic matching: the judge's subscription checks and the replay's routing look-ups.
TOPICS = [f"src/mqttaudit/topics/{name}.py" for name in ("matching", "trie", "validation")]
COMPILED = CODEC + CAPTURE + JUDGE + PIPELINE + TOPICS
# The capture's reading path in C (mqttaudit.capture.native): records, link/IP/TCP, the flow table, columns out.
NATIVE = Extension(
    "mqttaudit.capture._native",
    ["src/mqttaudit/capture/_native.c"],
    extra_compile_args=["-O3", "-Wall", "-Wextra", "-Wno-unused-parameter", "-Wno-missing-field-initializers"],
)


def parallel_compile(compiler: Any) -> None:
    """Makes ``compiler`` compile the C files of one extension side by side, one per core: mypyc writes a file per
    module (``multi_file``), and compiling them one after another on a single core took most of the install."""
    serial = compiler.compile

    def compile_sources(
        sources: Any,
        output_dir: Any = None,
        macros: Any = None,
        include_dirs: Any = None,
        debug: bool = False,
        extra_preargs: Any = None,
        extra_postargs: Any = None,
        depends: Any = None,
    ) -> list[str]:
        try:
            macros, objects, extra_postargs, pp_opts, build = compiler._setup_compile(
                output_dir, macros, include_dirs, sources, depends, extra_postargs
            )
            cc_args = compiler._get_cc_args(pp_opts, debug, extra_preargs)
        except AttributeError:  # a compiler class without distutils' internals: compile as it always does
            return serial(sources, output_dir, macros, include_dirs, debug, extra_preargs, extra_postargs, depends)
        jobs = [(obj, *build[obj]) for obj in objects if obj in build]
        with ThreadPoolExecutor(max_workers=max(1, os.cpu_count() or 1)) as pool:
            for _ in pool.map(lambda job: compiler._compile(*job, cc_args, extra_postargs, pp_opts), jobs):
                pass
        return list(objects)

    compiler.compile = compile_sources


class OptionalBuildExt(build_ext):
    """Falls back to the pure-Python codec when the C extension cannot be built."""

    def build_extensions(self) -> None:
        parallel_compile(self.compiler)
        super().build_extensions()

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:  # no compiler, no Python headers, ...
            self._warn(exc)

    def build_extension(self, ext: object) -> None:
        try:
            super().build_extension(ext)
        except Exception as exc:
            self._warn(exc)

    @staticmethod
    def _warn(exc: BaseException) -> None:
        print(f"mqttaudit: compiled codec not built ({exc}); installing the pure-Python codec", file=sys.stderr)


def ext_modules() -> list[object]:
    if os.environ.get("MQTTAUDIT_PURE_PYTHON"):
        return []
    try:
        from mypyc.build import mypycify
    except ImportError:
        print("mqttaudit: mypyc not available; installing the pure-Python codec", file=sys.stderr)
        return []
    return [*mypycify(COMPILED, opt_level="3", group_name="mqttaudit_codec", multi_file=True), NATIVE]


setup(ext_modules=ext_modules(), cmdclass={"build_ext": OptionalBuildExt})
