"""Predicate strings (delete, explain): anything they cannot take is a typed error.

Hypothesis feeds random text, SQL-shaped fragments and deep nesting to the parser and to
``delete`` / ``explain`` on a real table; only ``indexeddf.errors`` types may come out,
and a refused delete commits nothing.
"""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from indexeddf import IndexedTable
from indexeddf.errors import IndexedDFError, InvalidOptionError
from indexeddf.spec.predicate import parse_predicate

SCHEMA = pa.schema([("k", pa.int64()), ("s", pa.string()), ("d", pa.date32())])

FRAGMENTS = ["k", "s", "d", "x", "=", "<=>", "<>", "<", ">=", "IN", "(", ")", ",", "AND", "OR", "NOT", "IS",
             "NULL", "BETWEEN", "1", "-1", "1.5", "1e400", "99999999999999999999999", "'a'", "'", "DATE '2026-01-01'",
             "DATE 'x'", "TIMESTAMP 'zz'", "CAST(", "AS", "INT", ";", "SELECT", "*", "+", "0x1F", "X'00'", "é", "\\", "`k`"]


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("pred") / "t")
    data = pa.table({"k": pa.array(range(20), pa.int64()), "s": [f"s{i}" for i in range(20)],
                     "d": pa.array([None] * 20, pa.date32())})
    return IndexedTable.create(path, data, index_columns=["k"], num_buckets=2)


@pytest.mark.parametrize("depth", [5_000, 50_000])
def test_deep_nesting_is_a_typed_error(table, depth):
    text = "(" * depth + "k = 1" + ")" * depth
    before = table.update_incremental().version
    with pytest.raises(InvalidOptionError, match="nested too deeply"):
        table.delete(text)
    with pytest.raises(InvalidOptionError, match="nested too deeply"):
        table.explain(text)
    assert table.update_incremental().version == before


def test_shallow_nesting_still_works(table):
    assert "index: 'primary'" in table.explain("(" * 50 + "k = 3" + ")" * 50)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.one_of(st.text(max_size=60), st.lists(st.sampled_from(FRAGMENTS), max_size=12).map(" ".join)))
def test_any_text_parses_or_raises_a_typed_error(text):
    try:
        parse_predicate(text, SCHEMA)
    except IndexedDFError:
        pass


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from(FRAGMENTS), min_size=1, max_size=8).map(" ".join))
def test_delete_and_explain_raise_only_typed_errors(table, text):
    for run in (table.explain, lambda t: table.delete(t)):
        try:
            run(text)
        except IndexedDFError:
            pass
