"""The code passes the project's linter (ruff, configured in pyproject.toml): pyflakes'
errors (unused names, undefined names), pycodestyle's, and import order."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_ruff_passes():
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "indexeddf", "tests", "benchmarks"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-5000:] + done.stderr[-2000:]
