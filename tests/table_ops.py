"""One interpreter of random table operations for the property tests that replay them on a
table and compare every version with another engine (the connector's scans, delta-rs,
DuckDB's delta extension): appends, deletes, overwrites, optimize, restore, a secondary
index's lifecycle and the autoRefresh property, drawn by :func:`operations` and applied by
:func:`run_op`."""

from __future__ import annotations

from hypothesis import strategies as st

INDEX = "by_s"
"""The secondary index the operations create, drop, refresh and vacuum (on column ``s``)."""


def operations(nan: bool = False, vacuum: bool = False, max_size: int = 6):
    """Lists of operations: ``nan`` lets appends hold NaN floats, ``vacuum`` adds vacuums
    of the dropped secondary index."""
    lifecycle = ["create", "drop", "refresh"] + (["vacuum"] if vacuum else [])
    return st.lists(
        st.one_of(
            st.tuples(st.just("append"), st.integers(0, 300), st.integers(1, 40),
                      st.booleans() if nan else st.just(False)),
            st.tuples(st.just("delete"), st.integers(0, 300)),
            st.tuples(st.just("overwrite"), st.integers(0, 300), st.integers(0, 30)),
            st.tuples(st.just("optimize"), st.sampled_from(["quick", "full"])),
            st.tuples(st.just("restore"), st.integers(0, 50)),
            # index states: hybrid scans of unindexed appends, a secondary index, its lifecycle
            st.tuples(st.just("autoRefresh"), st.booleans()),
            st.tuples(st.just("index"), st.sampled_from(lifecycle)),
        ),
        min_size=1,
        max_size=max_size,
    )


def run_op(t, op, batch, index_buckets: int | None = None) -> None:
    """Apply one operation of :func:`operations` to the table ``t``; ``batch(keys)`` (or
    ``batch(keys, nan=True)``) builds rows; ``index_buckets``: the secondary index's bucket
    count (None: the default)."""
    kind = op[0]
    if kind == "append":
        keys = list(range(op[1], op[1] + op[2]))
        t.append(batch(keys, nan=True) if op[3] else batch(keys))
    elif kind == "delete":
        t.delete(f"k < {op[1]} AND k > {op[1] // 2}")
    elif kind == "overwrite":
        t.overwrite(batch(list(range(op[1], op[1] + op[2]))))
    elif kind == "optimize":
        t.optimize(mode=op[1])
    elif kind == "restore":
        t.restore(op[1] % (t.version + 1))
    elif kind == "autoRefresh":
        t.set_properties({"indexeddf.index.autoRefresh": str(op[1]).lower()})
    elif kind == "index":
        state = {i.name: i.state for i in t.indexes()}.get(INDEX)
        if op[1] == "create" and state in (None, "DELETED"):
            t.create_index(INDEX, ["s"], num_buckets=index_buckets)
        elif op[1] == "drop" and state == "ACTIVE":
            t.drop_index(INDEX)
        elif op[1] == "refresh":
            t.refresh()
        elif op[1] == "vacuum" and state == "DELETED":
            t.vacuum_index(INDEX)
