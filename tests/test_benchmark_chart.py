"""benchmarks/run.py draws what it printed: a real (tiny) run, then its chart."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_a_run_writes_its_figures_and_their_chart(tmp_path):
    out = tmp_path / "run.json"
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "run.py"), "--only", "append_1k_python",
                           "--rounds", "2", "--warmup", "0", "--out", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    results = json.loads(out.read_text())["results"]
    assert [r["scenario"] for r in results] == ["append_1k_python"]
    png = out.with_suffix(".png")
    assert f"Chart drawn in {png}" in done.stdout
    import matplotlib.image

    pixels = matplotlib.image.imread(str(png))
    assert pixels.shape[0] > 100 and pixels.shape[1] > 300
    # Bars of more than one colour were drawn (baseline grey, candidate blue), not an empty canvas.
    assert len({tuple(p) for p in pixels.reshape(-1, pixels.shape[2])[:: 97]}) > 5
