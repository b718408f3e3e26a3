"""A change's one-shot location of its target rows (``reader/locate.py``): through the
index or by the key columns, the same rows, file ids and ordinals as a lookup's, and
nothing left in the lookup cache."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from indexeddf import IndexedTable
from indexeddf.optimizer import planner
from indexeddf.reader import locate as locate_mod
from indexeddf.reader import lookup
from indexeddf.reader.cache import cache, cache_stats


def _rows(ks: list[int], tag: str) -> pa.Table:
    return pa.table({"k": pa.array(ks, pa.int64()), "c": pa.array([f"c{k % 3}" for k in ks]),
                     "v": pa.array([f"{tag}{k}" for k in ks])})


@pytest.fixture(scope="module")
def table(tmp_path_factory) -> IndexedTable:
    """Two index columns; files with a deletion vector; files the index does not cover."""
    path = str(tmp_path_factory.mktemp("locate") / "t")
    t = IndexedTable.create(path, _rows(list(range(0, 600)), "a"), ["k", "c"], num_buckets=4,
                            properties={"delta.enableDeletionVectors": "true"})
    t.append(_rows(list(range(600, 700)), "b"))
    t.delete("k % 7 = 0")  # deletion vectors
    t.set_properties({"indexeddf.index.autoRefresh": "false"})
    t.append(_rows(list(range(700, 760)) + [5, 6], "c"))  # not covered; 5 and 6 twice
    return t


def _sorted(t: pa.Table) -> list[tuple]:
    cols = [t.column(c).to_pylist() for c in t.column_names]
    return sorted(zip(*cols))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ks=st.lists(st.integers(0, 800), min_size=1, max_size=60), through=st.sampled_from(["index", "keys"]))
def test_both_ways_locate_what_a_lookup_locates(table, ks, through):
    snap = table.snapshot
    entry, _ = planner.join_index(snap, ["k", "c"])
    keys = pa.table({"k": pa.array(sorted(set(ks)), pa.int64()), "c": [f"c{k % 3}" for k in sorted(set(ks))]})
    plan = planner.plan_lookup(snap, entry, keys)
    want = lookup.run_plan(snap, plan, ["k", "v"], locate=True)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(locate_mod, "INDEX_ROWS_PER_KEY", 0 if through == "index" else 1 << 40)
        got = locate_mod.locate(snap, plan, ["k", "v"])
    assert got.column_names == want.column_names
    assert _sorted(got) == _sorted(want)
    present = {k for k in ks if 700 <= k < 760 or (k < 700 and k % 7 != 0)}
    assert set(got.column("k").to_pylist()) == present


def test_a_change_leaves_nothing_in_the_lookup_cache(table):
    cache().clear()
    snap = table.snapshot
    entry, _ = planner.join_index(snap, ["k", "c"])
    keys = pa.table({"k": pa.array(np.arange(1, 40), pa.int64()), "c": [f"c{k % 3}" for k in range(1, 40)]})
    for setting in (0, 1 << 40):  # through the index, by the key columns
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(locate_mod, "INDEX_ROWS_PER_KEY", setting)
            assert locate_mod.locate(snap, planner.plan_lookup(snap, entry, keys), ["k"]).num_rows > 30
    # Footers and deletion vectors are small and shared by every read; no index segment
    # or data row group stays behind.
    kinds = {k[0] for k in cache().keys()}
    assert kinds <= {"indexfooter", "footer", "dv"}, kinds
    assert cache_stats().bytes < 1 << 16


@given(values=st.lists(st.integers(-5, 30), max_size=80), keys=st.lists(st.integers(-5, 30), min_size=1, max_size=10),
       ordered=st.booleans())
def test_a_key_column_matches_its_keys_sorted_or_not(values, keys, ordered):
    values = sorted(values) if ordered else values
    got = locate_mod.matching_ordinals(pa.table({"k": pa.array(values, pa.int64())}), pa.table({"k": pa.array(keys, pa.int64())}))
    assert got.tolist() == [i for i, v in enumerate(values) if v in set(keys)]


@pytest.mark.parametrize("mode", ["none", "name"])
def test_a_partitioned_column_mapped_table_is_located_both_ways(tmp_path, mode):
    path = str(tmp_path / "t")
    data = pa.table({"k": pa.array(range(300), pa.int64()), "p": [f"p{k % 4}" for k in range(300)],
                     "v": [f"v{k}" for k in range(300)]})
    t = IndexedTable.create(path, data, ["k"], num_buckets=4, partition_by=["p"],
                            properties={"delta.enableDeletionVectors": "true", "delta.columnMapping.mode": mode})
    t.delete("k % 9 = 0")
    snap = t.snapshot
    entry, _ = planner.join_index(snap, ["k"])
    keys = pa.table({"k": pa.array([1, 9, 10, 77, 299, 500], pa.int64())})
    plan = planner.plan_lookup(snap, entry, keys)
    want = _sorted(lookup.run_plan(snap, plan, ["k", "p", "v"], locate=True))
    assert [r[0] for r in want] == [1, 10, 77, 299]
    for setting in (0, 1 << 40):
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(locate_mod, "INDEX_ROWS_PER_KEY", setting)
            assert _sorted(locate_mod.locate(snap, plan, ["k", "p", "v"])) == want
