"""The console scripts spark-prewarm and spark-cache: they replace the Python process with the
binary bundled in the package (bin/ beside this file), so exit codes, signals and stdio are
the tool's own."""

import os
import sys

from ._lib import _PACKAGE_DIR


def _exec(tool):
    path = _PACKAGE_DIR / "bin" / tool
    if not os.access(path, os.X_OK):
        sys.stderr.write(f"{tool}: the bundled binary {path} is missing; reinstall spark-mla-kernels\n")
        sys.exit(1)
    os.execv(path, [tool, *sys.argv[1:]])


def prewarm():
    _exec("spark-prewarm")


def cache():
    _exec("spark-cache")
