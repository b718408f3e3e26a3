"""SQL expressions (Spark syntax) compiled to Arrow: ``indexeddf.spec.expressions``.

DuckDB is the oracle. A hypothesis test builds random expressions over a random Arrow
table (int64, double, string, date, timestamp UTC, decimal, bool; NULLs everywhere) and
compares our result with DuckDB's, value by value. Each generated expression is a pair:
the Spark text we compile and a DuckDB text meaning the same under *Spark's* semantics
where the engines differ (Spark's ``x / 0`` is NULL: DuckDB gets ``x / NULLIF(y, 0)``;
``CAST(double AS BIGINT)`` truncates in Spark: DuckDB gets ``trunc`` first; ``<=>`` is
``IS NOT DISTINCT FROM``). Everything else is the SQL subset both engines read alike.
Targeted tests cover each construct, each error, column resolution and equality_keys.
"""

from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal

import duckdb
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from indexeddf.errors import AmbiguousColumnError, IndexedDFError, InvalidOptionError, SchemaMismatchError
from indexeddf.spec.expressions import compile_expression, compile_predicate, equality_keys, merge_columns

UTC = dt.timezone.utc
SCHEMA = pa.schema([("i", pa.int64()), ("j", pa.int64()), ("f", pa.float64()), ("s", pa.string()),
                    ("d", pa.date32()), ("ts", pa.timestamp("us", tz="UTC")), ("m", pa.decimal128(10, 2)),
                    ("b", pa.bool_())])
COLUMNS = dict(zip(SCHEMA.names, SCHEMA.types))

# --- the random table ---------------------------------------------------------------------
ROW = st.fixed_dictionaries({
    "i": st.none() | st.integers(-50, 50),
    "j": st.none() | st.integers(-50, 50),
    "f": st.none() | st.integers(-80, 80).map(lambda n: n / 4),  # quarters: exact in binary
    "s": st.none() | st.text(alphabet="ab A%_", max_size=4),
    "d": st.none() | st.dates(dt.date(1990, 1, 1), dt.date(2040, 12, 31)),
    "ts": st.none() | st.datetimes(dt.datetime(2000, 1, 1), dt.datetime(2030, 1, 1)).map(lambda v: v.replace(tzinfo=UTC)),
    "m": st.none() | st.integers(-99999, 99999).map(lambda n: Decimal(n).scaleb(-2)),
    "b": st.none() | st.booleans(),
})
TABLES = st.lists(ROW, max_size=8).map(lambda rows: pa.Table.from_pylist(rows, schema=SCHEMA))


# --- random expressions: (spark text, duckdb text) ------------------------------------------
def _pair(fmt: str, *args):
    """Format ``fmt`` with the Spark and the DuckDB sides of ``args``."""
    return fmt.format(*(a[0] for a in args)), fmt.format(*(a[1] for a in args))


def _same(text):
    return text, text


LEAF_INT = st.sampled_from(["i", "j", "0", "1", "7", "(-3)"]).map(_same)
LEAF_NUM = st.sampled_from(["f", "1.5", "0.25", "(-2.0)"]).map(_same)
LEAF_DEC = st.sampled_from(["m", "CAST(1.05 AS DECIMAL(4,2))"]).map(_same)
LEAF_STR = st.sampled_from(["s", "'a'", "'A b'", "''", "' a '"]).map(_same)
LEAF_DATE = st.sampled_from(["d", "DATE '2020-02-29'", "DATE '2001-01-01'"]).map(_same)


def ints(depth):
    if depth <= 0:
        return LEAF_INT
    sub, b, s = ints(depth - 1), bools(depth - 1), strings(depth - 1)
    return st.one_of(
        LEAF_INT,
        st.tuples(sub, st.sampled_from(["+", "-", "*", "%"]), sub).map(lambda t: _pair("({} " + t[1] + " {})", t[0], t[2])),
        st.tuples(sub, sub).map(lambda t: (f"({t[0][0]} div {t[1][0]})", f"({t[0][1]} // NULLIF({t[1][1]}, 0))")),
        sub.map(lambda a: _pair("abs({})", a)),
        sub.map(lambda a: _pair("(- {})", a)),
        st.tuples(b, sub, sub).map(lambda t: _pair("CASE WHEN {} THEN {} ELSE {} END", *t)),
        st.tuples(sub, sub).map(lambda t: _pair("CASE {} WHEN 1 THEN {} END", *t)),
        st.tuples(sub, sub).map(lambda t: _pair("coalesce({}, {})", *t)),
        st.tuples(st.sampled_from(["greatest", "least", "nullif"]), sub, sub).map(lambda t: _pair(t[0] + "({}, {})", t[1], t[2])),
        st.tuples(b, sub, sub).map(lambda t: _pair("if({}, {}, {})", *t)),
        s.map(lambda a: _pair("length({})", a)),
        st.tuples(st.sampled_from(["year", "month", "day"]), LEAF_DATE).map(lambda t: _pair(t[0] + "({})", t[1])),
        nums(depth - 1).map(lambda a: (f"CAST({a[0]} AS BIGINT)", f"CAST(trunc({a[1]}) AS BIGINT)")),
        # Spark's floor(double) is a bigint, DuckDB's a double: the cast makes both a bigint
        # (floor of a decimal literal is a decimal in Spark, which `div` here does not take).
        nums(depth - 1).map(lambda a: (f"CAST(floor({a[0]}) AS BIGINT)", f"CAST(floor({a[1]}) AS BIGINT)")),
    )


def nums(depth):
    if depth <= 0:
        return LEAF_NUM
    sub, i = nums(depth - 1), ints(depth - 1)
    any_num = st.one_of(sub, i, decimals(depth - 1))
    return st.one_of(
        LEAF_NUM,
        st.tuples(sub, st.sampled_from(["+", "-", "*"]), st.one_of(sub, i)).map(
            lambda t: _pair("({} " + t[1] + " {})", t[0], t[2])),
        st.tuples(any_num, any_num).map(lambda t: (f"({t[0][0]} / {t[1][0]})", f"({t[0][1]} / NULLIF({t[1][1]}, 0))")),
        st.tuples(sub, st.integers(0, 2)).map(lambda t: (f"round({t[0][0]}, {t[1]})", f"round({t[0][1]}, {t[1]})")),
        i.map(lambda a: _pair("CAST({} AS DOUBLE)", a)),
        st.tuples(sub, sub).map(lambda t: _pair("coalesce({}, {})", *t)),
    )


def decimals(depth):
    if depth <= 0:
        return LEAF_DEC
    sub, i = decimals(depth - 1), ints(depth - 1)
    return st.one_of(
        LEAF_DEC,
        st.tuples(sub, st.sampled_from(["+", "-"]), st.one_of(sub, i)).map(lambda t: _pair("({} " + t[1] + " {})", t[0], t[2])),
        st.tuples(sub, i).map(lambda t: _pair("({} * {})", *t)),
        sub.map(lambda a: _pair("abs({})", a)),
        st.tuples(sub, sub).map(lambda t: _pair("coalesce({}, {})", *t)),
    )


def strings(depth):
    if depth <= 0:
        return LEAF_STR
    sub, b = strings(depth - 1), bools(depth - 1)
    return st.one_of(
        LEAF_STR,
        st.tuples(st.sampled_from(["lower", "upper", "trim", "ltrim", "rtrim"]), sub).map(lambda t: _pair(t[0] + "({})", t[1])),
        st.tuples(sub, sub).map(lambda t: _pair("({} || {})", *t)),
        st.tuples(sub, st.integers(1, 4), st.integers(0, 4)).map(
            lambda t: (f"substring({t[0][0]}, {t[1]}, {t[2]})", f"substring({t[0][1]}, {t[1]}, {t[2]})")),
        st.tuples(b, sub, sub).map(lambda t: _pair("CASE WHEN {} THEN {} ELSE {} END", *t)),
        ints(depth - 1).map(lambda a: _pair("CAST({} AS STRING)", a)),
        st.tuples(sub, sub).map(lambda t: _pair("coalesce({}, {})", *t)),
    )


COMPARE = st.sampled_from(["=", "<>", "!=", "<", "<=", ">", ">="])
PATTERN = st.text(alphabet="ab%_ ", min_size=0, max_size=4).map(lambda p: f"'{p}'")


def bools(depth):
    leaves = st.one_of(st.sampled_from(["b", "TRUE", "FALSE", "(s IS NULL)", "(ts IS NOT NULL)"]).map(_same),
                       st.tuples(LEAF_DATE, COMPARE, LEAF_DATE).map(lambda t: _pair("({} " + t[1] + " {})", t[0], t[2])))
    if depth <= 0:
        return leaves
    sub = bools(depth - 1)
    i, n, s = ints(depth - 1), nums(depth - 1), strings(depth - 1)
    values = st.one_of(i, n, decimals(depth - 1))
    return st.one_of(
        leaves,
        st.tuples(values, COMPARE, values).map(lambda t: _pair("({} " + t[1] + " {})", t[0], t[2])),
        st.tuples(s, COMPARE, s).map(lambda t: _pair("({} " + t[1] + " {})", t[0], t[2])),
        st.tuples(sub, st.sampled_from(["AND", "OR"]), sub).map(lambda t: _pair("({} " + t[1] + " {})", t[0], t[2])),
        sub.map(lambda a: _pair("(NOT {})", a)),
        st.tuples(st.one_of(i, s), st.sampled_from(["IS NULL", "IS NOT NULL"])).map(lambda t: _pair("({} " + t[1] + ")", t[0])),
        st.tuples(i, i).map(lambda t: (f"({t[0][0]} <=> {t[1][0]})", f"({t[0][1]} IS NOT DISTINCT FROM {t[1][1]})")),
        st.tuples(i, st.sampled_from(["IN", "NOT IN"]), st.lists(st.sampled_from(["1", "2", "-3", "NULL", "j"]), min_size=1,
                                                                   max_size=4)).map(
            lambda t: _pair("({} " + t[1] + " (" + ", ".join(t[2]) + "))", t[0])),
        st.tuples(values, values, values).map(lambda t: _pair("({} BETWEEN {} AND {})", *t)),
        st.tuples(s, st.sampled_from(["LIKE", "NOT LIKE", "ILIKE"]), PATTERN).map(
            lambda t: _pair("({} " + t[1] + " " + t[2] + ")", t[0])),
        st.tuples(sub, st.sampled_from(["TRUE", "FALSE"])).map(
            lambda t: (f"({t[0][0]} IS {t[1]})", f"coalesce(({t[0][1]}) = {t[1]}, false)")),
        st.tuples(sub, sub, sub).map(lambda t: _pair("CASE WHEN {} THEN {} ELSE {} END", *t)),
    )


EXPRESSIONS = st.one_of(ints(2), nums(2), decimals(2), strings(2), bools(2))


def _duckdb(table: pa.Table, sql: str):
    with duckdb.connect() as con:
        con.execute("SET threads = 1")  # keeps the rows in the table's order
        con.register("tbl", table)
        return [r[0] for r in con.sql(f"SELECT {sql} AS out FROM tbl").fetchall()]


def _same_value(ours, theirs) -> bool:
    if ours is None or theirs is None:
        return ours is None and theirs is None
    if isinstance(ours, (float, Decimal)) or isinstance(theirs, (float, Decimal)):
        return math.isclose(float(ours), float(theirs), rel_tol=1e-9, abs_tol=1e-9)
    return ours == theirs


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(TABLES, EXPRESSIONS)
def test_random_expressions_agree_with_duckdb(table, pair):
    spark_sql, duck_sql = pair
    try:
        theirs = _duckdb(table, duck_sql)
    except duckdb.OutOfRangeException:  # an integer overflow: ours must refuse it too
        with pytest.raises(InvalidOptionError):
            compile_expression(spark_sql, COLUMNS).evaluate(table)
        return
    ours = compile_expression(spark_sql, COLUMNS).evaluate(table).to_pylist()
    assert len(ours) == len(theirs)
    for row, (a, b) in enumerate(zip(ours, theirs)):
        assert _same_value(a, b), f"{spark_sql} | duckdb: {duck_sql} | row {row} {table.slice(row, 1).to_pylist()}: {a!r} != {b!r}"


# --- targeted: each construct ----------------------------------------------------------------
T = pa.table({
    "k": pa.array([1, -7, None, 4], pa.int64()), "x": [1.5, -2.5, None, 0.0], "s": ["abc", " hi ", None, "A%b"],
    "d": pa.array([dt.date(2024, 1, 2), None, dt.date(2023, 5, 6), dt.date(2020, 2, 29)]),
    "t": pa.array([dt.datetime(2024, 1, 1, 10, tzinfo=UTC), None, dt.datetime(2023, 1, 1, tzinfo=UTC),
                   dt.datetime(2020, 1, 1, tzinfo=UTC)], pa.timestamp("us", "UTC")),
    "m": pa.array([Decimal("1.25"), Decimal("-9.99"), None, Decimal("0.00")], pa.decimal128(5, 2)),
    "b": [True, None, False, True],
})
TCOLS = dict(zip(T.column_names, T.schema.types))


def ev(text):
    return compile_expression(text, TCOLS).evaluate(T).to_pylist()


@pytest.mark.parametrize("text, want", [
    ("k + 1", [2, -6, None, 5]), ("k - 1", [0, -8, None, 3]), ("k * 2", [2, -14, None, 8]),
    ("k / 2", [0.5, -3.5, None, 2.0]),                 # Spark: `/` is a double division
    ("k div 2", [0, -3, None, 2]),                      # truncates toward zero
    ("k % 3", [1, -1, None, 1]),                        # the sign of the dividend (Java's %)
    ("x % 2", [1.5, -0.5, None, 0.0]), ("m % 1", [Decimal("0.25"), Decimal("-0.99"), None, Decimal("0.00")]),
    ("k / 0", [None] * 4), ("k % 0", [None] * 4), ("k div 0", [None] * 4), ("x / 0", [None] * 4),
    ("-k", [-1, 7, None, -4]), ("m + 1", [Decimal("2.25"), Decimal("-8.99"), None, Decimal("1.00")]),
    ("k = 1", [True, False, None, False]), ("k <> 1", [False, True, None, True]), ("k != 1", [False, True, None, True]),
    ("k < 1", [False, True, None, False]), ("k >= 1", [True, False, None, True]),
    ("k <=> NULL", [False, False, True, False]), ("k <=> 4", [False, False, False, True]),
    ("b AND k > 0", [True, False, False, True]), ("b OR NULL", [True, None, None, True]), ("NOT b", [False, None, True, False]),
    ("k IN (1, 4)", [True, False, None, True]), ("k IN (1, NULL)", [True, None, None, None]),
    ("k NOT IN (1, NULL)", [False, None, None, None]), ("k NOT IN (1)", [False, True, None, True]),
    ("k BETWEEN 0 AND 4", [True, False, None, True]), ("k NOT BETWEEN 0 AND 4", [False, True, None, False]),
    ("k IS NULL", [False, False, True, False]), ("k IS NOT NULL", [True, True, False, True]),
    ("b IS TRUE", [True, False, False, True]), ("b IS NOT FALSE", [True, True, False, True]),
    ("s LIKE 'a%'", [True, False, None, False]), ("s NOT LIKE 'a%'", [False, True, None, True]),
    ("s ILIKE 'a%'", [True, False, None, True]), ("s LIKE 'A!%_' ESCAPE '!'", [False, False, None, True]),
    ("s LIKE 'A\\\\%b'", [False, False, None, True]), ("s RLIKE 'b'", [True, False, None, True]),
    ("CASE WHEN k > 0 THEN 'pos' WHEN k < 0 THEN 'neg' ELSE 'none' END", ["pos", "neg", "none", "pos"]),
    ("CASE k WHEN 1 THEN 'one' WHEN 4 THEN 'four' END", ["one", None, None, "four"]),
    ("CASE WHEN b THEN 1 END", [1, None, None, 1]),      # a NULL condition is not taken
    ("CAST(x AS int)", [1, -2, None, 0]), ("CAST(m AS bigint)", [1, -9, None, 0]),
    ("CAST(k AS string)", ["1", "-7", None, "4"]), ("CAST(k AS double)", [1.0, -7.0, None, 4.0]),
    ("CAST(k AS decimal(5,1))", [Decimal("1.0"), Decimal("-7.0"), None, Decimal("4.0")]),
    ("CAST('2024-01-02' AS date) = d", [True, None, False, False]), ("CAST(b AS int)", [1, None, 0, 1]),
    ("CAST(t AS date)", [dt.date(2024, 1, 1), None, dt.date(2023, 1, 1), dt.date(2020, 1, 1)]),
    ("CAST(d AS timestamp) < t", [False, None, False, False]),
    ("d > '2023-01-01'", [True, None, True, False]), ("d = DATE '2024-01-02'", [True, None, False, False]),
    ("t = TIMESTAMP '2024-01-01 10:00:00'", [True, None, False, False]),    # no zone: UTC
    ("t = TIMESTAMP '2024-01-01T12:00:00+02:00'", [True, None, False, False]),
    ("coalesce(k, 0)", [1, -7, 0, 4]), ("ifnull(k, 0)", [1, -7, 0, 4]), ("nvl(s, '-')", ["abc", " hi ", "-", "A%b"]),
    ("if(b, 1, 2)", [1, 2, 2, 1]), ("iff(b, 'y', 'n')", ["y", "n", "n", "y"]), ("nullif(k, 1)", [None, -7, None, 4]),
    ("abs(k)", [1, 7, None, 4]), ("lower(s)", ["abc", " hi ", None, "a%b"]), ("upper(s)", ["ABC", " HI ", None, "A%B"]),
    ("length(s)", [3, 4, None, 3]), ("trim(s)", ["abc", "hi", None, "A%b"]), ("ltrim(s)", ["abc", "hi ", None, "A%b"]),
    ("rtrim(s)", ["abc", " hi", None, "A%b"]), ("trim(BOTH 'a' FROM s)", ["bc", " hi ", None, "A%b"]),
    ("substring(s, 2)", ["bc", "hi ", None, "%b"]), ("substr(s, 1, 2)", ["ab", " h", None, "A%"]),
    ("substring(s, 0, 2)", ["ab", " h", None, "A%"]), ("substring(s, -2)", ["bc", "i ", None, "%b"]),
    ("substring(s, -2, 1)", ["b", "i", None, "%"]), ("substring(s, -5, 3)", ["a", " h", None, "A"]),
    ("substring(s, 2, 0)", ["", "", None, ""]),
    ("concat(s, '-', k)", ["abc-1", " hi --7", None, "A%b-4"]), ("s || 'x'", ["abcx", " hi x", None, "A%bx"]),
    ("round(x)", [2.0, -3.0, None, 0.0]), ("round(m, 1)", [Decimal("1.3"), Decimal("-10.0"), None, Decimal("0.0")]),
    ("round(k, -1)", [0, -10, None, 0]), ("floor(x)", [1, -3, None, 0]), ("ceil(x)", [2, -2, None, 0]),
    ("ceil(m)", [Decimal("2"), Decimal("-9"), None, Decimal("0")]), ("floor(k)", [1, -7, None, 4]),
    ("greatest(k, 2)", [2, 2, 2, 4]), ("least(k, x)", [1.0, -7.0, None, 0.0]),
    ("year(d)", [2024, None, 2023, 2020]), ("month(d)", [1, None, 5, 2]), ("day(d)", [2, None, 6, 29]),
    ("dayofmonth(t)", [1, None, 1, 1]),
    ("NULL", [None] * 4), ("1.5", [Decimal("1.5")] * 4), ("1e3", [1000.0] * 4), ("'it''s'", ["its"] * 4),
    ("`k` + 1", [2, -6, None, 5]), ("(((k)))", [1, -7, None, 4]), ("k + 2147483648", [2147483649, 2147483641, None, 2147483652]),
])
def test_construct(text, want):
    assert ev(text) == want


def test_types_and_columns_used():
    c = compile_expression("CASE WHEN k > 0 THEN x ELSE m END", TCOLS)
    assert c.result_type == pa.float64() and c.columns_used == {"k", "x", "m"}
    assert compile_expression("k / 2", TCOLS).result_type == pa.float64()
    assert compile_expression("floor(x)", TCOLS).result_type == pa.int64()
    assert compile_expression("length(s)", TCOLS).result_type == pa.int32()
    assert compile_expression("1.5", TCOLS).result_type == pa.decimal128(2, 1)
    assert compile_expression("TIMESTAMP '2024-01-01 00:00:00'", TCOLS).result_type == pa.timestamp("us", "UTC")
    assert compile_expression("k > 1", TCOLS).columns_used == {"k"}


def test_current_date_and_constants_fill_every_row():
    assert ev("current_date()") == [dt.datetime.now(UTC).date()] * 4
    assert len(ev("current_timestamp()")) == 4
    assert compile_expression("1 + 1", TCOLS).evaluate(T.slice(0, 0)).to_pylist() == []


def test_compiled_expression_runs_in_a_dataset_scan():
    import pyarrow.dataset as ds

    c = compile_predicate("k > 0 AND s LIKE 'a%'", TCOLS)
    assert ds.dataset(T).to_table(filter=c.expression).column("k").to_pylist() == [1]


# --- errors ----------------------------------------------------------------------------------
@pytest.mark.parametrize("text, match", [
    ("foo(k)", r"cannot evaluate `FOO\(k\)` in expression `foo\(k\)`: function foo is not supported; supported: abs"),
    ("hash(k)", "function hash is not supported"),
    ("k + s", "arithmetic needs numbers"), ("k IN (SELECT 1)", "not a subquery"),
    ("x + INTERVAL 1 DAY", "INTERVAL is not supported"), ("CAST(k AS map<int,int>)", "type MAP<INT, INT> is not supported"),
    ("substring(s, k)", "must be an integer literal"), ("s LIKE s", "LIKE pattern must be a string literal"),
    ("k = 'abc'", "cannot cast 'abc' to int64"), ("d = DATE 'x'", "cannot cast"), ("k +", "cannot parse"),
    ("", "cannot parse|empty"), ("k AND b", "is int64, not a boolean"), ("b + 1", "arithmetic needs numbers"),
    ("k = d", "cannot compare int64 and date32"), ("*", "not an expression|not supported"),
    ("(" * 5000 + "k" + ")" * 5000, "nested too deeply"), ("k div x", "div needs integers"),
])
def test_unsupported_is_a_typed_error(text, match):
    with pytest.raises(InvalidOptionError, match=match):
        compile_expression(text, TCOLS)


def test_data_errors_are_typed_at_evaluation():
    with pytest.raises(InvalidOptionError, match="overflow"):
        ev("9223372036854775807 + k")
    with pytest.raises(InvalidOptionError, match="cannot evaluate"):
        ev("CAST(s AS int)")


def test_unknown_column_names_it_and_the_available_ones():
    with pytest.raises(SchemaMismatchError, match=r"'q'.*columns: \['k', 'x'") as e:
        compile_expression("q + 1", TCOLS)
    assert e.value.columns == ["q"]


def test_a_predicate_must_be_boolean():
    with pytest.raises(InvalidOptionError, match="not a boolean"):
        compile_predicate("k + 1", TCOLS)
    assert compile_predicate("NULL", TCOLS).evaluate(T).to_pylist() == [None] * 4


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["k", "s", "x", "q", "t.k", "=", "<=>", "+", "/", "%", "(", ")", ",", "AND", "NOT", "IN",
                                 "CASE", "WHEN", "THEN", "END", "NULL", "1", "1.5", "'a'", "CAST(", "AS", "int", "foo(",
                                 "substring(", "LIKE", "DATE '2024-01-01'", "1e400", "99999999999999999999999999999999999999999"]),
                max_size=10).map(" ".join))
def test_any_text_compiles_or_raises_a_typed_error(text):
    try:
        compile_expression(text, TCOLS).evaluate(T)
    except IndexedDFError:
        pass


# --- column resolution for merges ------------------------------------------------------------
TARGET = pa.schema([("k", pa.int64()), ("v", pa.int64()), ("only_t", pa.string())])
SOURCE = pa.schema([("k", pa.int32()), ("v", pa.int64()), ("name", pa.string())])
JOINED_COLUMNS, ALIASES = merge_columns(TARGET, SOURCE, "t", "s")
JOINED = pa.table({"t.k": [1, 2], "t.v": [10, 20], "t.only_t": ["a", "b"], "s.k": pa.array([1, 2], pa.int32()),
                   "s.v": [11, 5], "s.name": ["x", "y"]})


def test_merge_columns_naming():
    assert list(JOINED_COLUMNS) == ["t.k", "t.v", "t.only_t", "s.k", "s.v", "s.name"]
    assert ALIASES == {"t": "t.", "s": "s."}
    assert merge_columns(TARGET, SOURCE)[1] == {"target": "target.", "source": "source."}
    with pytest.raises(InvalidOptionError):
        merge_columns(TARGET, SOURCE, "x", "X")


def test_qualified_unqualified_and_backquoted_references():
    c = compile_expression("s.v + 1 + `t`.`v` + only_t_len", {**JOINED_COLUMNS, "only_t_len": pa.int64()}, aliases=ALIASES)
    assert c.columns_used == {"s.v", "t.v", "only_t_len"}
    c = compile_expression("upper(name) || only_t || T.K", JOINED_COLUMNS, aliases=ALIASES)  # names ignore case
    assert c.columns_used == {"s.name", "t.only_t", "t.k"}
    assert c.evaluate(JOINED).to_pylist() == ["Xa1", "Yb2"]


def test_ambiguous_unqualified_name():
    with pytest.raises(AmbiguousColumnError, match=r"column `v` is ambiguous.*\['t.v', 's.v'\]"):
        compile_expression("v > 1", JOINED_COLUMNS, aliases=ALIASES)
    with pytest.raises(SchemaMismatchError):  # it is a SchemaMismatchError and an InvalidOptionError
        compile_expression("k = 1", JOINED_COLUMNS, aliases=ALIASES)


def test_unknown_alias_and_column_of_an_alias():
    with pytest.raises(SchemaMismatchError, match=r"no table or alias 'x'.*known: \['s', 't'\]"):
        compile_expression("x.k = 1", JOINED_COLUMNS, aliases=ALIASES)
    with pytest.raises(SchemaMismatchError, match=r"column 'name' of 't'.*\['k', 'v', 'only_t'\]"):
        compile_expression("t.name = 'a'", JOINED_COLUMNS, aliases=ALIASES)


def test_dotted_column_names_without_aliases():
    c = compile_expression("t.v < s.v", JOINED_COLUMNS)  # the joined table's names, read literally
    assert c.evaluate(JOINED).to_pylist() == [True, False]


def test_table_name_as_a_second_qualifier():
    aliases = {**ALIASES, "events": "t."}
    assert compile_expression("events.v", JOINED_COLUMNS, aliases=aliases).columns_used == {"t.v"}


# --- equality_keys -----------------------------------------------------------------------------
def keys(text):
    return equality_keys(text, JOINED_COLUMNS, aliases=ALIASES, target_prefix="t.", source_prefix="s.")


def test_equality_keys_both_orders_and_no_residual():
    j = keys("t.k = s.k AND s.v = t.v")
    assert j.keys == [("k", "k"), ("v", "v")] and j.residual is None


def test_equality_keys_residual():
    j = keys("(t.k = s.k) AND t.v < s.v AND s.name LIKE 'x%'")
    assert j.keys == [("k", "k")]
    assert j.residual_text == "t.v < s.v AND s.name LIKE 'x%'"
    assert j.residual.columns_used == {"t.v", "s.v", "s.name"}
    assert j.residual.evaluate(JOINED).to_pylist() == [True, False]


def test_equality_keys_ignores_or_literals_same_side_and_unjoinable_types():
    assert keys("t.k = s.k OR t.v = s.v").keys == []
    assert keys("t.k = 1 AND t.k = t.v").keys == []
    j = keys("t.only_t = s.v AND t.k = s.k AND t.k = s.v")  # string = bigint needs a cast; k's second pair stays residual
    assert j.keys == [("k", "k")]
    assert j.residual_text == "t.only_t = s.v AND t.k = s.v"
    assert keys("t.k <=> s.k").keys == []


def test_equality_keys_errors_are_typed():
    with pytest.raises(SchemaMismatchError):
        keys("t.k = s.missing")
    with pytest.raises(InvalidOptionError):
        keys("t.k = foo(s.k)")
    with pytest.raises(InvalidOptionError, match="not a boolean"):
        keys("t.k = s.k AND t.v + 1")


def test_decimal_results_past_38_digits_lose_scale_as_spark():
    t = pa.table({"m": pa.array([Decimal("123.45")], pa.decimal128(31, 2))})
    c = compile_expression("m * CAST(1.123456789 AS decimal(38,9))", dict(zip(t.column_names, t.schema.types)))
    assert c.result_type == pa.decimal128(38, 6)
    assert c.evaluate(t).to_pylist() == [Decimal("138.690741")]  # rounded half up to 6 digits
