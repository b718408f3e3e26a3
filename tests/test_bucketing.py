"""``indexeddf.spec.bucketing`` against Spark's own ``hash()`` and ``pmod(hash(), n)``.

Every value set is put into one Spark DataFrame (built from an explicit Spark schema)
so the whole file runs a handful of Spark jobs; our hashes come from pyarrow arrays of
the matching Arrow types and must agree value for value.
"""

from __future__ import annotations

import datetime as dt
import itertools
import math
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from indexeddf.errors import InvalidOptionError, UnsupportedTypeError
from indexeddf.spec.bucketing import (
    HASH_BLOCK,
    KEY_HASH_SEED,
    SEED,
    bucket_ids,
    bucket_ids_and_key_hash,
    hash_python_values,
    is_hashable_type,
    key_hash,
    seed_prefix,
    spark_hash,
)

pytestmark = pytest.mark.spark

BUCKET_COUNTS = (1, 7, 16, 200)
UTC = dt.timezone.utc


def _dec(unscaled: int, scale: int) -> Decimal:
    """A Decimal with exactly ``scale`` digits after the point (exact: no context rounding)."""
    return Decimal(f"{unscaled}E-{scale}")


def _wide_unscaled() -> list[int]:
    """Unscaled values whose BigInteger.toByteArray() has every length from 1 to 16."""
    out = [0, 1, -1]
    for nbytes in range(1, 17):
        top = 2 ** (8 * nbytes - 1)  # first value needing nbytes + 1 bytes
        for v in (top - 1, -top, top, -top - 1, top // 3, -(top // 3) - 1):
            if abs(v) < 10**38:
                out.append(v)
    out += [10**38 - 1, -(10**38 - 1), 2**63, -(2**63) - 1, 2**64 - 1]
    return out


def _ascii_strings() -> list[str]:
    return ["abcdefghijklmnopq"[:n] for n in range(14)]  # lengths 0..13: all tail lengths


_BINARY = (
    [b"", b"\x00", b"\x80", b"\xff", b"\x7f\x80", b"\xff\xfe\xfd", b"\x01\x02\x03\x04"]
    + [bytes((0x80 + 17 * i) % 256 for i in range(n)) for n in range(1, 14)]
    + [bytes(range(256)), bytes(range(255, -1, -1)) * 13]
)

_STRINGS = _ascii_strings() + [
    "é",  # 2 bytes: tail bytes >= 0x80
    "日",  # 3 bytes
    "😀",  # 4 bytes, one word
    "a😀",  # 5 bytes
    "ü日😀",  # 9 bytes
    "Grüße, Jürgen ❤",
    "日本語テキスト",
    "emoji 🎉🚀👍🏽 family 👨‍👩‍👧",
    "\x00",
    "a\x00b",
    "x" * 3001,
    "日本語😀" * 700,  # ~9 KB
    " leading and trailing ",
]

# name -> (Spark type DDL, Arrow type, values). None is null in every type.
CASES: dict[str, tuple[str, pa.DataType, list]] = {
    "tinyint": ("tinyint", pa.int8(), [-128, -1, 0, 1, 127, 42, -77, None]),
    "smallint": ("smallint", pa.int16(), [-32768, -1, 0, 1, 32767, 1234, -300, None]),
    "int": ("int", pa.int32(), [-(2**31), -1, 0, 1, 2**31 - 1, 123456789, -65536, None]),
    "bigint": (
        "bigint",
        pa.int64(),
        [-(2**63), -1, 0, 1, 2**63 - 1, 2**31, -(2**31) - 1, 2**32, -(2**32), 1234567890123, None],
    ),
    "float": (
        "float",
        pa.float32(),
        [0.0, -0.0, math.nan, math.inf, -math.inf, 1.0, -1.0, 1.5, 0.1, 3.14159,
         1e-45, 1.17549435e-38, 3.4028234663852886e38, -3.4028234663852886e38, 1e30, -1e-30, None],
    ),
    "double": (
        "double",
        pa.float64(),
        [0.0, -0.0, math.nan, math.inf, -math.inf, 1.0, -1.0, 0.1, -123.456,
         5e-324, 2.2250738585072014e-308, 1.7976931348623157e308, -1.7976931348623157e308,
         1e300, -1e-300, 2.0**53 + 2, None],
    ),
    "decimal_10_2": (
        "decimal(10,2)",
        pa.decimal128(10, 2),
        [_dec(v, 2) for v in (0, 1, -1, 100, -100, 1234567899, -9999999999, 9999999999, 42)] + [None],
    ),
    "decimal_18_4": (
        "decimal(18,4)",
        pa.decimal128(18, 4),
        [_dec(v, 4) for v in (0, 7, -7, 10**18 - 1, -(10**18 - 1), 2**40, -(2**40))] + [None],
    ),
    "decimal_19_0": (
        "decimal(19,0)",
        pa.decimal128(19, 0),
        [_dec(v, 0) for v in (0, 1, -1, 127, 128, -128, -129, 2**63 - 1, -(2**63), 10**19 - 1, -(10**19 - 1))]
        + [None],
    ),
    "decimal_38_10": ("decimal(38,10)", pa.decimal128(38, 10), [_dec(v, 10) for v in _wide_unscaled()] + [None]),
    "boolean": ("boolean", pa.bool_(), [True, False, None, False, True, True]),
    "string": ("string", pa.string(), _STRINGS + [None]),
    "binary": ("binary", pa.binary(), _BINARY + [None]),
    "date": (
        "date",
        pa.date32(),
        [dt.date(1970, 1, 1), dt.date(1969, 12, 31), dt.date(1, 1, 1), dt.date(9999, 12, 31),
         dt.date(2024, 2, 29), dt.date(1582, 10, 15), dt.date(2000, 1, 1), None],
    ),
    "timestamp": (
        "timestamp",
        pa.timestamp("us", tz="UTC"),
        [dt.datetime(1970, 1, 1, tzinfo=UTC), dt.datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
         dt.datetime(2024, 2, 29, 12, 34, 56, 789012, tzinfo=UTC), dt.datetime(1, 1, 1, tzinfo=UTC),
         dt.datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC), dt.datetime(1900, 3, 1, 0, 0, 0, 1, tzinfo=UTC),
         None],
    ),
    "timestamp_ntz": (
        "timestamp_ntz",
        pa.timestamp("us"),
        [dt.datetime(1970, 1, 1), dt.datetime(1969, 12, 31, 23, 59, 59, 999999),
         dt.datetime(2024, 2, 29, 12, 34, 56, 789012), dt.datetime(1, 1, 1),
         dt.datetime(9999, 12, 31, 23, 59, 59, 999999), dt.datetime(1900, 3, 1, 0, 0, 0, 1), None],
    ),
}
NUM_ROWS = max(len(v) for _, _, v in CASES.values())


def _padded(values: list) -> list:
    """Pad a value list with nulls to NUM_ROWS, so every type shares one DataFrame."""
    return values + [None] * (NUM_ROWS - len(values))


def _schema(fields: list[tuple[str, str]]):
    from pyspark.sql.types import StructType, _parse_datatype_string

    schema = StructType()
    for name, ddl in fields:
        schema = schema.add(name, _parse_datatype_string(ddl), True)
    return schema


def _collect(df, exprs: dict) -> dict[str, list]:
    """Evaluate named Spark column expressions, ordered by ``id``; one Spark job."""
    rows = df.select("id", *[e.alias(n) for n, e in exprs.items()]).orderBy("id").collect()
    return {n: [r[n] for r in rows] for n in exprs}


# --------------------------------------------------------------------------------------
# One DataFrame with a column per type: hash(c) and pmod(hash(c), n) for each.
# --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def single_column_results(spark):
    from pyspark.sql import functions as F

    names = list(CASES)
    schema = _schema([("id", "int")] + [(n, CASES[n][0]) for n in names])
    columns = [_padded(CASES[n][2]) for n in names]
    rows = [(i, *vals) for i, vals in enumerate(zip(*columns))]
    df = spark.createDataFrame(rows, schema)
    exprs = {}
    for n in names:
        exprs[f"h_{n}"] = F.hash(n)
        for b in BUCKET_COUNTS:
            exprs[f"p{b}_{n}"] = F.pmod(F.hash(n), F.lit(b))
    return _collect(df, exprs)


def _arrow(name: str) -> pa.Array:
    _, arrow_type, values = CASES[name]
    return pa.array(_padded(values), type=arrow_type)


@pytest.mark.parametrize("name", list(CASES))
def test_single_column_hash_matches_spark(single_column_results, name):
    expected = single_column_results[f"h_{name}"]
    got = spark_hash([_arrow(name)])
    assert got.dtype == np.int32
    values = _padded(CASES[name][2])
    mismatches = [(v, e, g) for v, e, g in zip(values, expected, got.tolist()) if e != g]
    assert not mismatches, f"{name}: (value, spark, ours) {mismatches[:5]}"
    # A null leaves the seed unchanged.
    assert all(e == SEED for v, e in zip(values, expected) if v is None)


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("num_buckets", BUCKET_COUNTS)
def test_single_column_pmod_matches_spark(single_column_results, name, num_buckets):
    expected = single_column_results[f"p{num_buckets}_{name}"]
    got = bucket_ids([_arrow(name)], num_buckets)
    assert got.dtype == np.int32
    assert got.tolist() == expected
    assert all(0 <= b < num_buckets for b in expected)


@pytest.mark.parametrize(
    ("name", "large_type"),
    [("string", pa.large_string()), ("binary", pa.large_binary())],
)
def test_large_variants_hash_like_spark(single_column_results, name, large_type):
    arr = _arrow(name).cast(large_type)
    assert spark_hash([arr]).tolist() == single_column_results[f"h_{name}"]


@pytest.mark.parametrize("name", ["string", "bigint", "decimal_38_10", "double", "boolean"])
def test_dictionary_encoded_hash_like_decoded(single_column_results, name):
    arr = _arrow(name)
    if pa.types.is_boolean(arr.type):
        encoded = pa.DictionaryArray.from_arrays(
            pa.array([0 if v else (None if v is None else 1) for v in arr.to_pylist()], pa.int32()),
            pa.array([True, False]),
        )
    else:
        encoded = arr.dictionary_encode()
    assert spark_hash([encoded]).tolist() == single_column_results[f"h_{name}"]


@pytest.mark.parametrize("name", ["string", "binary", "bigint", "int", "boolean", "float", "decimal_38_10",
                                  "decimal_10_2", "timestamp", "date"])
def test_sliced_and_chunked_arrays(single_column_results, name):
    arr = _arrow(name)
    expected = np.array(single_column_results[f"h_{name}"], dtype=np.int32)
    n = len(arr)
    # Odd offsets exercise bit offsets in validity/boolean bitmaps and in var offsets.
    for start in (1, 3, 5, 9):
        for stop in (n - 1, n):
            sliced = arr.slice(start, stop - start)
            assert sliced.offset == start
            np.testing.assert_array_equal(spark_hash([sliced]), expected[start:stop])
    cuts = [0, 1, 4, 5, 11, n]
    chunked = pa.chunked_array([arr.slice(a, b - a) for a, b in zip(cuts, cuts[1:])], type=arr.type)
    np.testing.assert_array_equal(spark_hash([chunked]), expected)
    np.testing.assert_array_equal(spark_hash([pa.chunked_array([], type=arr.type)]), np.empty(0, np.int32))


# --------------------------------------------------------------------------------------
# Multi-column keys, with nulls in every position.
# --------------------------------------------------------------------------------------

MULTI_COLUMNS = {
    "a": ("int", pa.int32(), [None, 0, -7, 2**31 - 1]),
    "b": ("string", pa.string(), [None, "", "abc", "ünï😀x"]),
    "c": ("double", pa.float64(), [None, -0.0, 1.5, math.nan]),
    "d": ("date", pa.date32(), [None, dt.date(2020, 5, 17)]),
    "e": ("decimal(38,6)", pa.decimal128(38, 6), [None, _dec(-(10**30) - 1, 6)]),
    "f": ("bigint", pa.int64(), [None, -(2**63)]),
    "g": ("timestamp_ntz", pa.timestamp("us"), [None, dt.datetime(1999, 12, 31, 23, 59, 59, 5)]),
}
MULTI_KEYS = {
    "ab": ("a", "b"),
    "ba": ("b", "a"),
    "abc": ("a", "b", "c"),
    "cdb": ("c", "d", "b"),
    "ea": ("e", "a"),
    "fgb": ("f", "g", "b"),
}
MULTI_ROWS = list(itertools.product(*[v for _, _, v in MULTI_COLUMNS.values()]))


@pytest.fixture(scope="module")
def multi_column_results(spark):
    from pyspark.sql import functions as F

    names = list(MULTI_COLUMNS)
    schema = _schema([("id", "int")] + [(n, MULTI_COLUMNS[n][0]) for n in names])
    df = spark.createDataFrame([(i, *r) for i, r in enumerate(MULTI_ROWS)], schema)
    exprs = {}
    for key, cols in MULTI_KEYS.items():
        exprs[f"h_{key}"] = F.hash(*cols)
        for b in BUCKET_COUNTS:
            exprs[f"p{b}_{key}"] = F.pmod(F.hash(*cols), F.lit(b))
    return _collect(df, exprs)


def _multi_arrays(cols: tuple[str, ...]) -> list[pa.Array]:
    names = list(MULTI_COLUMNS)
    return [pa.array([r[names.index(c)] for r in MULTI_ROWS], type=MULTI_COLUMNS[c][1]) for c in cols]


@pytest.mark.parametrize("key", list(MULTI_KEYS))
def test_multi_column_hash_and_pmod_match_spark(multi_column_results, key):
    cols = MULTI_KEYS[key]
    arrays = _multi_arrays(cols)
    assert spark_hash(arrays).tolist() == multi_column_results[f"h_{key}"]
    for b in BUCKET_COUNTS:
        assert bucket_ids(arrays, b).tolist() == multi_column_results[f"p{b}_{key}"]


def test_blocks_and_both_seeds_match_spark(spark):
    """Keys over several hash blocks, in chunks that cross the blocks' edges: the bucket and the
    key hash (Spark's hash from the key seed: ``hash(seed_prefix, ...)``), each alone and both in
    one pass, equal Spark's for every row."""
    from pyspark.sql import functions as F

    n = 2 * HASH_BLOCK + 777
    s = F.when(F.col("id") % 11 == 0, None).otherwise(F.concat(F.repeat(F.lit("v"), F.col("id") % 70), F.col("id")))
    df = spark.range(n).select(F.col("id").cast("int").alias("id"), s.alias("s"), (F.col("id") * 7919 - 10**6).alias("k"))
    rows = df.select("id", "s", "k", F.hash("s", "k").alias("h"),
                     F.hash(F.lit(seed_prefix(KEY_HASH_SEED)), "s", "k").alias("kh")).orderBy("id").collect()
    cuts = [0, 1000, HASH_BLOCK + 5, n]
    keys = [pa.chunked_array([pa.array([r[c] for r in rows[a:b]], t) for a, b in zip(cuts, cuts[1:])])
            for c, t in (("s", pa.string()), ("k", pa.int64()))]
    want_hash = np.array([r["h"] for r in rows], np.int32)
    want_key = np.array([r["kh"] for r in rows], np.int32).view(np.uint32)
    np.testing.assert_array_equal(spark_hash(keys), want_hash)
    np.testing.assert_array_equal(key_hash(keys), want_key)
    for b in BUCKET_COUNTS:
        buckets, hashes = bucket_ids_and_key_hash(keys, b)
        np.testing.assert_array_equal(buckets, np.mod(want_hash.astype(np.int64), b).astype(np.int32))
        np.testing.assert_array_equal(bucket_ids(keys, b), buckets)
        np.testing.assert_array_equal(hashes, want_key)


def test_multi_column_all_null_row_is_seed(multi_column_results):
    all_null = MULTI_ROWS.index(tuple(None for _ in MULTI_COLUMNS))
    for key in MULTI_KEYS:
        assert multi_column_results[f"h_{key}"][all_null] == SEED


def test_multi_column_with_misaligned_chunks(multi_column_results):
    a, b, c = _multi_arrays(("a", "b", "c"))
    n = len(a)
    ca = pa.chunked_array([a.slice(0, 3), a.slice(3, n - 3)])
    cb = pa.chunked_array([b.slice(0, 50), b.slice(50, 1), b.slice(51)])
    cc = c.slice(0)
    assert spark_hash([ca, cb, cc]).tolist() == multi_column_results["h_abc"]


@pytest.mark.parametrize("key", ["ab", "abc", "fgb"])
def test_hash_python_values_matches_spark(multi_column_results, key):
    cols = MULTI_KEYS[key]
    names = list(MULTI_COLUMNS)
    rows = [tuple(r[names.index(c)] for c in cols) for r in MULTI_ROWS]
    types = [MULTI_COLUMNS[c][1] for c in cols]
    assert hash_python_values(rows, types).tolist() == multi_column_results[f"h_{key}"]
    for b in BUCKET_COUNTS:
        assert hash_python_values(rows, types, num_buckets=b).tolist() == multi_column_results[f"p{b}_{key}"]


# --------------------------------------------------------------------------------------
# Property test: random int64s, doubles and unicode strings vs Spark.
# --------------------------------------------------------------------------------------

_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.data_too_large])
@given(
    rows=st.lists(
        st.tuples(
            st.one_of(st.none(), st.integers(min_value=-(2**63), max_value=2**63 - 1)),
            st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True)),
            st.one_of(st.none(), _text),
        ),
        min_size=1,
        max_size=300,
    )
)
def test_property_random_values_match_spark(spark, rows):
    from pyspark.sql import functions as F

    schema = _schema([("id", "int"), ("i", "bigint"), ("d", "double"), ("s", "string")])
    df = spark.createDataFrame([(k, *r) for k, r in enumerate(rows)], schema)
    got = _collect(df, {"i": F.hash("i"), "d": F.hash("d"), "s": F.hash("s"),
                        "ids": F.hash("i", "d", "s"), "p": F.pmod(F.hash("s", "i"), F.lit(13))})
    i = pa.array([r[0] for r in rows], pa.int64())
    d = pa.array([r[1] for r in rows], pa.float64())
    s = pa.array([r[2] for r in rows], pa.string())
    assert spark_hash([i]).tolist() == got["i"]
    assert spark_hash([d]).tolist() == got["d"]
    assert spark_hash([s]).tolist() == got["s"]
    assert spark_hash([i, d, s]).tolist() == got["ids"]
    assert bucket_ids([s, i], 13).tolist() == got["p"]


# --------------------------------------------------------------------------------------
# Pure-Python behaviour (no Spark): units, NaN payloads, long values, errors.
# --------------------------------------------------------------------------------------


def test_timestamp_units_convert_to_micros():
    micros = pa.array([0, -1, -2, 1, 1_700_000_000_123_456, None], pa.timestamp("us"))
    nanos = pa.array([0, -1, -1001, 1999, 1_700_000_000_123_456_789, None], pa.timestamp("ns"))
    np.testing.assert_array_equal(spark_hash([nanos]), spark_hash([micros]))
    secs = pa.array([0, -1, 1_700_000_000, None], pa.timestamp("s", tz="Europe/Paris"))
    as_us = pa.array([0, -1_000_000, 1_700_000_000_000_000, None], pa.timestamp("us", tz="UTC"))
    np.testing.assert_array_equal(spark_hash([secs]), spark_hash([as_us]))
    millis = pa.array([-1, 1_700_000_000_123, None], pa.timestamp("ms"))
    as_us = pa.array([-1000, 1_700_000_000_123_000, None], pa.timestamp("us"))
    np.testing.assert_array_equal(spark_hash([millis]), spark_hash([as_us]))


def test_every_nan_payload_hashes_as_canonical_nan():
    canonical64 = spark_hash([pa.array([math.nan], pa.float64())])[0]
    payloads = np.array([0x7FF8000000000001, 0xFFF8000000000000, 0x7FF0000000000001], dtype=np.uint64)
    odd = pa.array(payloads.view(np.float64), pa.float64())
    assert (spark_hash([odd]) == canonical64).all()
    canonical32 = spark_hash([pa.array([math.nan], pa.float32())])[0]
    odd32 = pa.array(np.array([0x7FC00001, 0xFFC00000, 0x7F800001], dtype=np.uint32).view(np.float32))
    assert (spark_hash([odd32]) == canonical32).all()
    zeros = spark_hash([pa.array([0.0, -0.0], pa.float32())])
    assert zeros[0] == zeros[1]


def test_mixed_short_and_very_long_values_take_the_scalar_path(single_column_results):
    # Rows hashed alone (scalar path) must agree with rows hashed in bulk (vector path).
    long_vals = ["z" * 5000 + str(i) for i in range(20)] + ["ab", "日本" * 40, None]
    bulk = spark_hash([pa.array(long_vals)])
    alone = [spark_hash([pa.array([v], pa.string())])[0] for v in long_vals]
    assert bulk.tolist() == alone
    strings = _padded(CASES["string"][2])
    assert hash_python_values([(s,) for s in strings], [pa.string()]).tolist() == single_column_results["h_string"]


def test_seed_parameter_and_empty_input():
    arr = pa.array([1, None], pa.int32())
    assert spark_hash([arr], seed=0)[1] == 0
    assert spark_hash([arr], seed=-5)[1] == -5
    assert spark_hash([pa.array([], pa.string())]).shape == (0,)
    assert bucket_ids([pa.array([], pa.int64())], 8).shape == (0,)
    assert hash_python_values([], [pa.int64()]).shape == (0,)


@pytest.mark.parametrize(
    "arrow_type",
    [pa.uint8(), pa.uint32(), pa.uint64(), pa.float16(), pa.null(), pa.date64(), pa.time64("us"),
     pa.decimal256(40, 2), pa.list_(pa.int32()), pa.struct([("x", pa.int32())]), pa.duration("us"),
     pa.binary(4), pa.dictionary(pa.int32(), pa.uint16())],
)
def test_unsupported_types_raise(arrow_type):
    assert not is_hashable_type(arrow_type)
    arr = pa.nulls(2, type=arrow_type)
    with pytest.raises(UnsupportedTypeError) as info:
        spark_hash([pa.array([1, 2], pa.int64()), arr])
    message = str(info.value)
    assert str(arrow_type) in message and "supported" in message and "int64" in message


@pytest.mark.parametrize("name", list(CASES))
def test_supported_types_are_hashable(name):
    t = CASES[name][1]
    assert is_hashable_type(t)
    assert is_hashable_type(pa.dictionary(pa.int32(), t))


def test_invalid_arguments():
    with pytest.raises(InvalidOptionError):
        spark_hash([])
    with pytest.raises(InvalidOptionError):
        spark_hash([pa.array([1, 2]), pa.array([1])])
    for bad in (0, -3, 1.5, True):
        with pytest.raises(InvalidOptionError):
            bucket_ids([pa.array([1])], bad)
        with pytest.raises(InvalidOptionError):
            bucket_ids_and_key_hash([pa.array([1])], bad)
    with pytest.raises(InvalidOptionError):
        hash_python_values([(1, 2)], [pa.int64()])
