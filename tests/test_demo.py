"""The README's first command: the demo runs to the end on a small table and says
what each step proves (the README runs it at 3,000,000 rows)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow


def test_the_demo_runs_and_leaves_a_table(demo_run):
    done, folder = demo_run  # python -m indexeddf.demo LAKE --rows 100000, started with the run (conftest.py)
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    for title in ("build a table of 100,000 events", "a point lookup", "an IN-list of 100 keys", "explain",
                  "join 10,000 probe keys", "hybrid scan", "refresh", "time travel", "optimize", "upsert with MERGE",
                  "vacuum --dry-run"):
        assert title in out, title
    assert out.count("proves:") >= 9
    assert "lookup([-1]) -> 2 rows" in out and "unindexed files scanned: 0" in out
    from indexeddf import IndexedTable

    t = IndexedTable.for_path(str(folder / "lake" / "events"))
    assert "1 updated, 1 inserted in version" in out and "1 of " in out
    assert "lookup([-1, -7]) -> ['new', 'new', 'refund']" in out
    assert t.snapshot.num_records() == 100_004  # 100,000 built, 3 appended, 1 inserted by the merge
