"""The in-memory index of a bucket: merged segments probe as their parts do."""

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from indexeddf.reader.trie import BucketTrie, Segment, in_sorted

entries = st.lists(st.tuples(st.integers(0, 40), st.integers(0, 5), st.integers(0, 1000)), max_size=40)


def segment(path: str, rows: list[tuple[int, int, int]]) -> Segment:
    rows = sorted(rows)
    return Segment.from_entries(path, pa.table({
        "hash": pa.array([r[0] for r in rows], pa.uint32()),
        "file_id": pa.array([r[1] for r in rows], pa.int64()),
        "row": pa.array([r[2] for r in rows], pa.int32()),
    }))


def matches(trie: BucketTrie, probes: np.ndarray, live: np.ndarray | None) -> list[tuple[int, int, int]]:
    return sorted(zip(*(a.tolist() for a in trie.probe(probes, live))))


@settings(max_examples=200, deadline=None)
@given(parts=st.lists(entries, min_size=1, max_size=6), probes=st.lists(st.integers(0, 45), max_size=10),
       live=st.none() | st.sets(st.integers(0, 6)))
def test_a_merged_segment_probes_as_its_parts(parts, probes, live):
    segments = tuple(segment(f"f{i}", rows) for i, rows in enumerate(parts))
    merged = Segment.merged("f0", segments)
    p = np.array(probes, np.uint32)
    ids = None if live is None else np.array(sorted(live), np.int64)
    assert matches(BucketTrie((merged,)), p, ids) == matches(BucketTrie(segments), p, ids)
    assert len(merged.hashes) == sum(len(rows) for rows in parts)


@settings(max_examples=200, deadline=None)
@given(values=st.lists(st.integers(-5, 50), max_size=30), members=st.sets(st.integers(-5, 50), max_size=30))
def test_in_sorted_is_isin(values, members):
    v, m = np.array(values, np.int64), np.array(sorted(members), np.int64)
    assert in_sorted(v, m).tolist() == np.isin(v, m).tolist()
