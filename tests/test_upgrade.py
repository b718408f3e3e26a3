"""``indexeddf upgrade``: a table of the first layout becomes a Delta table in place.

``tests/data/first_layout`` was written by indexeddf at commit b3325a0 (the last
release of the first layout: create, append, create_index, append, delete, optimize
full, append; checkpoints every 3 versions), and ``first_layout_expected.json`` holds
what that code read from it (keys per version, a lookup through the secondary index).
"""

from __future__ import annotations

import json
import os
import shutil
import sys

import pytest

deltalake = pytest.importorskip("deltalake")

from indexeddf import IndexedTable, cli  # noqa: E402
from indexeddf.errors import TableExistsError, TableNotFoundError, VersionNotFoundError  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
HERE = os.path.join(os.path.dirname(__file__), "data")
EXPECTED = json.load(open(os.path.join(HERE, "first_layout_expected.json")))


@pytest.fixture
def old_table(tmp_path):
    path = str(tmp_path / "t")
    shutil.copytree(os.path.join(HERE, "first_layout"), path)
    return path


def test_upgrade_keeps_every_version_and_index(old_table, capsys):
    with pytest.raises(TableNotFoundError, match="indexeddf upgrade"):
        IndexedTable.for_path(old_table)
    assert cli.main(["upgrade", old_table, "-q"]) == 0
    assert "8 commits" in capsys.readouterr().out
    for v, keys in EXPECTED["rows_by_version"].items():
        ours = IndexedTable.for_path(old_table, version=int(v)).to_arrow()
        assert sorted(ours["k"].to_pylist()) == keys, v
        # Any Delta reader reads the same version.
        theirs = deltalake.DeltaTable(old_table, version=int(v)).to_pyarrow_table()
        assert sorted(theirs["k"].to_pylist()) == keys, v
    t = IndexedTable.for_path(old_table)
    assert sorted((i.name, i.state) for i in t.indexes()) == [tuple(x) for x in EXPECTED["indexes"]]
    assert sorted(t.lookup(["s1"], index="by_s")["k"].to_pylist()) == EXPECTED["lookup_s1"]
    assert "unindexed files scanned: 0" in t.explain("k = 41")
    # History keeps the old operations and timestamps.
    assert [h.operation for h in t.history()][-1] == "CREATE TABLE"
    # The upgraded table takes writes, from indexeddf and from delta-rs.
    t.append(IndexedTable.for_path(old_table).to_arrow().slice(0, 2))
    deltalake.write_deltalake(old_table, t.to_arrow().slice(0, 1), mode="append")
    assert IndexedTable.for_path(old_table).to_arrow().num_rows == len(EXPECTED["rows_by_version"]["7"]) + 3
    assert os.path.isdir(os.path.join(old_table, "_indexeddf_log"))  # left untouched
    # Once written as a Delta table, a second upgrade would lose those commits: refused.
    with pytest.raises(TableExistsError):
        IndexedTable.upgrade(old_table)


def test_upgrade_after_old_commits_were_cleaned_up(old_table):
    for v in range(3):  # the old log cleaned up versions 0-2; checkpoint 3 stands for them
        os.remove(os.path.join(old_table, "_indexeddf_log", f"{v:020d}.json"))
    result = IndexedTable.upgrade(old_table)
    assert result.commits == [4, 5, 6, 7] and result.checkpoints[0] == 3
    for v in range(3, 8):
        keys = sorted(IndexedTable.for_path(old_table, version=v).to_arrow()["k"].to_pylist())
        assert keys == EXPECTED["rows_by_version"][str(v)]
    with pytest.raises(VersionNotFoundError):
        IndexedTable.for_path(old_table, version=1)


def test_an_interrupted_upgrade_is_run_again(old_table):
    IndexedTable.upgrade(old_table)
    os.remove(os.path.join(old_table, "_delta_log", f"{7:020d}.json"))  # as if cut short
    IndexedTable.upgrade(old_table)
    assert sorted(IndexedTable.for_path(old_table).to_arrow()["k"].to_pylist()) == EXPECTED["rows_by_version"]["7"]
