"""The connector's speed goals: the JVM connector (``spark.read.format("indexeddf")``) against
Spark's own reads of the same files, in one run.

The session is the run's (``scenarios_spark.spark()``: ``local[2]``, UI off, built with
``indexeddf.configure``, so ``format("indexeddf")`` is the JVM connector). The table is the
events table (``datasets.events(args.rows)``: int64 ``user_id`` with about 4 rows per id,
a double, strings, 32 buckets, one file per bucket). Baselines read exactly the table's
live files with ``spark.read.parquet``; the 10M-key join is also timed on Spark's own
``bucketBy(32, "user_id").sortBy("user_id")`` table of the same rows.

As users do, every DataFrame is loaded once and queried many times; each round gives the
baseline and every candidate the same new key group, and each query collects its rows.
After every round (outside the timings) the scenario's ``check`` compares each
candidate's answer with the baseline's (the rows, sorted; aggregates with a float
tolerance), so a run stops instead of timing a wrong answer. Goals are stated as ratios
between two measurements of the same round (``harness.Goal``), printed under each table.
"""

from __future__ import annotations

import math
import statistics
import time
from pathlib import Path

import datasets
import pyarrow as pa
from harness import Goal, Scenario
from scenarios_join import SIZES, _bucketed, _probe, _query
from scenarios_spark import _parquet_df, spark

from indexeddf import IndexedTable

KEY = "user_id"
CONNECTOR = "spark.read.format('indexeddf')"
"""Label prefix of the measurements through the JVM connector."""
LOOKUP = "spark.createDataFrame(t.lookup(keys).combine_chunks()).collect()"


_READ: set[str] = set()
"""Tables this process has loaded through the connector (a scenario queries what it loads)."""


def _indexed(path: str):
    """The table through the JVM connector (loaded once per scenario)."""
    _READ.add(path)
    return spark().read.format("indexeddf").load(path)


def spark_jobs(fn) -> int:
    """How many Spark jobs ``fn()`` started (job ids without a job group, before and after;
    Spark's status store keeps them whether or not the UI runs)."""
    tracker = spark().sparkContext.statusTracker()
    before = set(tracker.getJobIdsForGroup(None))
    fn()
    return len(set(tracker.getJobIdsForGroup(None)) - before)


def _diagnostics(method: str):
    """Calls ``io.indexeddf.spark.Diagnostics.<method>()``, the connector's public counters for tests
    and benchmarks (``rowCacheStats``, ``clearRowCache``, ``segmentCacheStats``)."""
    s = spark()
    jvm, gateway = s._jvm, s.sparkContext._gateway
    loader = jvm.org.apache.spark.util.Utils.getContextOrSparkClassLoader()
    klass = jvm.java.lang.Class.forName("io.indexeddf.spark.Diagnostics", True, loader)
    m = klass.getMethod(method, gateway.new_array(jvm.java.lang.Class, 0))
    return m.invoke(None, gateway.new_array(jvm.java.lang.Object, 0))


def segment_cache_stats() -> tuple[int, int, int] | None:
    """(segments, entries, bytes) of the connector's JVM cache of index segments, as the
    connector accounts them (``Diagnostics.segmentCacheStats()``); None when this connector has no
    such counter."""
    try:
        segments, entries, held = list(_diagnostics("segmentCacheStats"))
    except Exception:  # noqa: BLE001 - an older connector (no class, no method): not measurable
        return None
    return int(segments), int(entries), int(held)


def _segment_bytes_per_row() -> tuple[float, str] | None:
    stats = segment_cache_stats()
    if stats is None or stats[1] == 0:
        return None
    segments, entries, held = stats
    return held / entries, (f"{held:,} bytes for {entries:,} entries (one a row) in {segments} segments, "
                            "the driver JVM's cache as the connector accounts it")


SEGMENT_GOAL = dict(
    text="cached index segments <= 16 bytes per row in the JVM", at_most=16.0, unit="bytes/row",
    measure=_segment_bytes_per_row,
    unmeasurable="this connector exposes no counter of its cached index segments (Diagnostics.segmentCacheStats), "
                 "or no segment was cached",
)


def _first_pass(fn, groups) -> tuple[float, float]:
    """Run ``fn`` once per key group; the median and the slowest time in ms."""
    times = []
    for g in groups:
        start = time.perf_counter()
        fn(g)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times), max(times)


def _plain_hand_over_note(table: IndexedTable, groups: list[list[int]]) -> str:
    """What spark.createDataFrame(t.lookup(keys)), as a user writes it, returns here: PySpark
    4.3.0 drops every row after the first empty record batch of an Arrow table, and lookup()
    can return empty batches; counted on every key group of the scenario and on a table of
    batches of 2, 0 and 3 rows."""
    import pyarrow as pa

    s = spark()
    lost = []
    for i, g in enumerate(groups):
        answer = table.lookup(g)
        got = len(s.createDataFrame(answer).collect())
        if got != answer.num_rows:
            lost.append(f"group {i}: {got} of {answer.num_rows}")
    batch = lambda *v: pa.record_batch({"a": pa.array(v, pa.int64())})  # noqa: E731
    tiny = len(s.createDataFrame(pa.Table.from_batches([batch(1, 2), batch(), batch(3, 4, 5)])).collect())
    return (f"The goal states the comparison as spark.createDataFrame(t.lookup(keys)).collect(). Here that returned "
            f"fewer rows than lookup() for {len(lost)} of the {len(groups)} key groups"
            + (f" ({'; '.join(lost)})" if lost else "")
            + f"; PySpark drops the rows after an Arrow table's first empty record batch (batches of 2, 0 and 3 "
              f"rows: {tiny} of 5 rows), and lookup() returns such batches. So the timed comparison is "
              f"t.lookup(keys).combine_chunks() (one batch per column), whose rows are checked every round.")


def _rows_key(rows) -> list[tuple]:
    return sorted(tuple(r) for r in rows)


FLOOR = "(floor: the same query through the connector on an empty table)"
"""Label suffix of the connector's fixed cost (a query that finds no file to read)."""
CACHED_LOOKUP = f"{CONNECTOR} (JVM connector) with spark.indexeddf.rowCache.maxBytes=4g"
SQL_PARQUET = "spark.read.parquet(the same files), where(SQL text)"
SQL_CONNECTOR = f"{CONNECTOR} (JVM connector), where(SQL text)"
SQL_CACHED = f"{SQL_CONNECTOR} with spark.indexeddf.rowCache.maxBytes=4g"
NO_JOB = "local DataFrame of one key group's rows, built once: .collect() (floor: a query with no Spark job)"
"""A query answered on the driver with no Spark job at all (a LocalTableScan): the least a
driver-side lookup can cost in this session."""


def _answers(values: dict[str, object]):
    """The baseline's answer and every checked candidate's, by name."""
    (base_name, base), *others = values.items()
    return base_name, base, [(n, v) for n, v in others if "(floor" not in n]


def _same_rows(values: dict[str, object]) -> None:
    """Every checked callable of the round returned the baseline's rows (in any order)."""
    base_name, base, others = _answers(values)
    want = _rows_key(base)
    for name, got in others:
        if _rows_key(got) != want:
            raise AssertionError(f"wrong answer: {name} returned {len(got)} rows, {base_name} {len(want)} "
                                 f"(or the same count with other values)")


def _same_aggregates(values: dict[str, object]) -> None:
    """Every checked callable of the round returned the baseline's one-row aggregate (floats
    within 1e-9 relative: sums may add the same values in another order)."""
    base_name, base, others = _answers(values)
    want = tuple(base[0]) if isinstance(base, list) else (base,)
    for name, got in others:
        have = tuple(got[0]) if isinstance(got, list) else (got,)
        same = len(have) == len(want) and all(
            math.isclose(a, b, rel_tol=1e-9) if isinstance(a, float) or isinstance(b, float) else a == b
            for a, b in zip(have, want))
        if not same:
            raise AssertionError(f"wrong answer: {name} returned {have}, {base_name} {want}")


def _bloom_note(table: IndexedTable) -> str:
    """Whether the table's files carry Parquet bloom filters on the key (Spark's Parquet
    reader, the baseline, skips row groups with them)."""
    import pyarrow.parquet as pq

    files = table.snapshot.live_files()
    meta = pq.ParquetFile(table.snapshot.storage.full(files[0].path)).metadata
    col = meta.schema.names.index(KEY)
    bloom = meta.num_row_groups > 0 and meta.row_group(0).column(col).bloom_filter_offset is not None
    return (f"The table's {len(files)} data files ({meta.num_row_groups} row groups in the first) "
            f"{'carry' if bloom else 'carry no'} Parquet bloom filters on {KEY}, written by indexeddf; "
            "spark.read.parquet of the same files uses them and the row-group statistics to skip row groups.")


def _lookup(args, n_keys: int, name: str, goals: list[Goal]) -> Scenario:
    from pyspark.sql import functions as F

    path = datasets.events(args.rows)
    s = spark()
    keys = datasets.some_keys(path, n_keys * 40, seed=13)
    groups = [keys[i: i + n_keys] for i in range(0, len(keys), n_keys)]
    parquet = _parquet_df(path)
    indexed = _indexed(path)
    empty = _indexed(datasets.events_empty())
    table = IndexedTable.for_path(path)
    state = {"i": 0, "group": groups[0]}

    def where(group):
        return F.col(KEY) == group[0] if len(group) == 1 else F.col(KEY).isin(group)

    def sql(group):
        """The same predicate as SQL text: Spark parses it in the JVM, where a Column of n
        literals costs PySpark a py4j call per literal (about 1 ms each)."""
        return f"{KEY} = {group[0]}" if len(group) == 1 else f"{KEY} IN ({', '.join(map(str, group))})"

    def advance():
        state["i"] += 1
        state["group"] = groups[state["i"] % len(groups)]
        return state["group"]

    def cached(predicate):
        """The connector's lookup with the row cache on (opt-in): decoded row groups stay in the JVM."""
        return _with_conf(ROW_CACHE, ROW_CACHE_SIZE, lambda: indexed.where(predicate).collect())

    def via_lookup(group):
        return s.createDataFrame(table.lookup(group).combine_chunks()).collect()

    local = s.createDataFrame(table.lookup(groups[0]).combine_chunks())
    shape = f"where({KEY} = key)" if n_keys == 1 else f"where({KEY} IN {n_keys} keys)"
    # Spark jobs per query, counted once per callable on keys the timed rounds do not use first.
    jobs = {label: [spark_jobs(lambda g=g: fn(g)) for g in groups[-3:]] for label, fn in [
        ("parquet", lambda g: parquet.where(where(g)).collect()),
        ("indexeddf", lambda g: indexed.where(where(g)).collect()),
        ("indexeddf on an empty table", lambda g: empty.where(where(g)).collect()),
        ("createDataFrame(lookup)", via_lookup),
        ("local DataFrame", lambda g: local.collect())]}
    # Both paths keep caches per process (the connector's index segments and footers in the
    # JVM, lookup()'s tries in Python). Every key group goes once through each before the
    # timed rounds, so both are timed warm; the first pass is reported.
    cold = {label: _first_pass(lambda g, fn=fn: fn(g), groups) for label, fn in [
        ("indexeddf", lambda g: indexed.where(where(g)).collect()),
        ("createDataFrame(lookup)", via_lookup),
        (f"indexeddf with {ROW_CACHE}={ROW_CACHE_SIZE}", lambda g: cached(where(g)))]}
    notes = [_bloom_note(table),
             "First pass over all 40 key groups, before the rounds (cold caches; median, max): "
             + "; ".join(f"{label} {med:.1f} ms, {top:.1f} ms" for label, (med, top) in cold.items()),
             "Spark jobs per query (3 queries each, counted with the status tracker): "
             + "; ".join(f"{label} {', '.join(map(str, n))}" for label, n in jobs.items())
             + " (goal of the connector's driver-side lookup: 0)",
             _plain_hand_over_note(table, groups)]
    return Scenario(
        name=name,
        description=f"{shape}.collect() over {args.rows:,} rows, one DataFrame per source loaded once, "
                    f"a new key group each round",
        baseline=("spark.read.parquet(the same files)", lambda: parquet.where(where(advance())).collect()),
        candidates=[
            (f"{CONNECTOR} (JVM connector)", lambda: indexed.where(where(state["group"])).collect()),
            (LOOKUP, lambda: via_lookup(state["group"])),
            (f"{CONNECTOR} {FLOOR}", lambda: empty.where(where(state["group"])).collect()),
            (NO_JOB, lambda: local.collect()),
            (CACHED_LOOKUP, lambda: cached(where(state["group"]))),
        ] + ([
            (SQL_PARQUET, lambda: parquet.where(sql(state["group"])).collect()),
            (SQL_CONNECTOR, lambda: indexed.where(sql(state["group"])).collect()),
            (f"{SQL_CONNECTOR} {FLOOR}", lambda: empty.where(sql(state["group"])).collect()),
            (SQL_CACHED, lambda: cached(sql(state["group"]))),
        ] if n_keys > 1 else []),
        target="see the goals below",
        notes=notes,
        check=_same_rows,
        goals=goals,
    )


def point_lookup(work: Path, args) -> Scenario:
    return _lookup(args, 1, "connector_point_lookup", [
        Goal("indexeddf >= 100x faster than parquet", f"{CONNECTOR} (JVM connector)",
             "spark.read.parquet(the same files)", 0.01),
        Goal("indexeddf no slower than createDataFrame(t.lookup)", f"{CONNECTOR} (JVM connector)", LOOKUP, 1.0),
        Goal("indexeddf with the row cache no slower than createDataFrame(t.lookup)", CACHED_LOOKUP, LOOKUP, 1.0),
    ])


def in_list_lookup(work: Path, args) -> Scenario:
    return _lookup(args, 100, "connector_in_list_100", [
        Goal("indexeddf >= 20x faster than parquet", f"{CONNECTOR} (JVM connector)",
             "spark.read.parquet(the same files)", 0.05),
        Goal("indexeddf >= 20x faster than parquet, both written as SQL text", SQL_CONNECTOR, SQL_PARQUET, 0.05),
        Goal("indexeddf with the row cache >= 20x faster than parquet", CACHED_LOOKUP,
             "spark.read.parquet(the same files)", 0.05),
        Goal("indexeddf with the row cache >= 20x faster than parquet, both written as SQL text", SQL_CACHED,
             SQL_PARQUET, 0.05),
        Goal(**SEGMENT_GOAL),
    ])


def _scan(args, agg: str) -> Scenario:
    from pyspark.sql import functions as F

    path = datasets.events(args.rows)
    parquet = _parquet_df(path)
    indexed = _indexed(path)
    run, text = {
        "sum": (lambda df: df.agg(F.sum("amount")).collect(), "sum(amount)"),
        "count": (lambda df: df.count(), "count(*)"),
        "max_string": (lambda df: df.agg(F.max("url")).collect(), "max(url), a string column"),
    }[agg]
    return Scenario(
        name=f"connector_full_scan_{agg}",
        description=f"{text} over all {args.rows:,} rows",
        baseline=("spark.read.parquet(the same files)", lambda: run(parquet)),
        candidates=[(f"{CONNECTOR} (JVM connector)", lambda: run(indexed))],
        target="within 1.1x of parquet",
        check=_same_aggregates,
        goals=[Goal("indexeddf within 1.1x of parquet", f"{CONNECTOR} (JVM connector)",
                    "spark.read.parquet(the same files)", 1.1)],
    )


def _repeat(fn, n: int = 6) -> list[float]:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return times


JOIN = f"{CONNECTOR}.load(p).join(probe, '{KEY}')"
"""Label of a plain join through the connector."""
PARQUET_JOIN = f"spark.read.parquet(the same files).join(probe, '{KEY}')"
"""Label of the same join on Spark's own read of the table's files (the baseline)."""
ROW_CACHE = "spark.indexeddf.rowCache.maxBytes"
ROW_CACHE_SIZE = "4g"
"""The row cache the join scenarios time (decoded row groups kept in the JVM; off by default)."""


def _with_conf(key: str, value: str, fn):
    """``fn()`` with one Spark conf set (the connector reads it when the query is optimized)."""
    s = spark()
    s.conf.set(key, value)
    try:
        return fn()
    finally:
        s.conf.unset(key)


def _touched_row_groups(path: str, keys) -> tuple[int, int]:
    """(row groups holding at least one of ``keys``, all row groups) of the table's live files:
    what any reader at row-group granularity must decode for these keys."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    table = IndexedTable.for_path(path)
    wanted = pa.array(sorted(set(int(k) for k in keys)), pa.int64())
    touched = total = 0
    for f in table.snapshot.live_files():
        pf = pq.ParquetFile(table.snapshot.storage.full(f.path))
        for g in range(pf.metadata.num_row_groups):
            total += 1
            column = pf.read_row_group(g, columns=[KEY]).column(0)
            touched += bool(pc.any(pc.is_in(column, value_set=wanted)).as_py())
    return touched, total


def join_small(work: Path, args) -> Scenario:
    """The 10K-key join (rows/2000 probe keys), without and with the row cache. Set-up: a
    freshly loaded DataFrame runs the join 6 times with an empty row cache (run 1 loads the
    index and the rows it reads), the stability goal is on runs 2..6."""
    import pyarrow.parquet as pq

    path = datasets.events(args.rows)
    cold = path not in _READ
    n = max(1, args.rows // SIZES["S"])
    probe = _probe(work, path, n, seed=31)
    parquet = _parquet_df(path)
    indexed = _indexed(path)
    empty = _indexed(datasets.events_empty())
    ours = JOIN
    cached = f"{ours} with {ROW_CACHE}={ROW_CACHE_SIZE}"
    base = PARQUET_JOIN

    fresh = _indexed(path)
    _diagnostics("clearRowCache")
    runs = _repeat(lambda: _with_conf(ROW_CACHE, ROW_CACHE_SIZE, lambda: _query(fresh.join(probe, KEY))))
    later = runs[1:]
    spread = max(later) / min(later)
    parquet_runs = _repeat(lambda: _query(parquet.join(probe, KEY)))
    groups, rows, held = (int(x) for x in _diagnostics("rowCacheStats"))
    probe_keys = pq.read_table(sorted(work.glob(f"probe-{n}-31.parquet"))[0], columns=[KEY]).column(0).to_pylist()
    touched, total = _touched_row_groups(path, probe_keys)
    notes = [
        f"Repeated in set-up on a freshly loaded DataFrame with an empty row cache ({ROW_CACHE}={ROW_CACHE_SIZE}), "
        f"6 runs in a row: indexeddf {', '.join(f'{x * 1000:.0f}' for x in runs)} ms (run 1 "
        f"{'is' if cold else 'is not'} the first read of this table through the connector in this process); "
        f"slowest / fastest of runs 2..6 = {spread:.2f}. Parquet, the same way: "
        f"{', '.join(f'{x * 1000:.0f}' for x in parquet_runs)} ms, "
        f"{max(parquet_runs[1:]) / min(parquet_runs[1:]):.2f}.",
        f"The probe's {len(set(probe_keys)):,} keys hold rows in {touched:,} of the table's {total:,} row groups: "
        f"without the row cache the index would decode nearly the whole table, so the connector leaves the "
        f"table's side to Spark's scan (lookup.maxReadFraction 0.5). With the row cache, run 1 decodes those "
        f"row groups once ({groups:,} row groups, {rows:,} rows in the columns the join reads, {held / 2**20:,.0f} "
        f"MiB held after the set-up) and later runs read only the probe's rows from memory.",
    ]
    return Scenario(
        name="connector_join_S",
        description=f"{n:,} probe rows (existing keys) joined with {args.rows:,} rows on {KEY}; "
                    "count and sum(amount)",
        baseline=(base, lambda: _query(parquet.join(probe, KEY))),
        candidates=[(ours, lambda: _query(indexed.join(probe, KEY))),
                    (cached, lambda: _with_conf(ROW_CACHE, ROW_CACHE_SIZE, lambda: _query(indexed.join(probe, KEY)))),
                    (f"{ours} {FLOOR}", lambda: _query(empty.join(probe, KEY)))],
        target="see the goals below",
        notes=notes,
        check=_same_aggregates,
        goals=[
            Goal("indexeddf join >= 3x faster than the parquet join", ours, base, 1 / 3),
            Goal("indexeddf join with the row cache >= 3x faster than the parquet join", cached, base, 1 / 3),
            Goal("after run 1, slowest of the next 5 runs within 1.5x of the fastest (row cache)",
                 value=spread, at_most=1.5),
        ],
    )


def join_hundred(work: Path, args) -> Scenario:
    """A plain join with 100 probe keys: the index answers the table's side (no row cache)."""
    path = datasets.events(args.rows)
    probe = _probe(work, path, 100, seed=33)
    parquet = _parquet_df(path)
    indexed = _indexed(path)
    ours = JOIN
    base = PARQUET_JOIN
    return Scenario(
        name="connector_join_100",
        description=f"100 probe rows (existing keys) joined with {args.rows:,} rows on {KEY}; count and sum(amount)",
        baseline=(base, lambda: _query(parquet.join(probe, KEY))),
        candidates=[(ours, lambda: _query(indexed.join(probe, KEY)))],
        target="no goal in a plain join whose probe is small enough for the index to pay without a cache",
        check=_same_aggregates,
    )


def _bucketed_one_file(work: Path, path: str):
    """Spark's ``bucketBy + sortBy`` table written with one file per bucket (the probe side is
    repartitioned by the key first): with ``spark.sql.legacy.bucketedTableScan.outputOrdering``
    (``indexeddf.configure`` sets it) Spark's scan of it reports its order too."""
    name = "events_bucketed_one_file"
    spark().sql(f"DROP TABLE IF EXISTS {name}")
    (_parquet_df(path).repartition(datasets.NUM_BUCKETS, KEY).write.bucketBy(datasets.NUM_BUCKETS, KEY)
     .sortBy(KEY).option("path", str(work / "bucketed-one-file")).mode("overwrite").saveAsTable(name))
    return spark().table(name)


def _parquet_files(folder: Path) -> int:
    """Data files Spark wrote for a table (one per bucket and writing task)."""
    return len(list(folder.glob("part-*")))


def _table_side_sorts(df, probe) -> str:
    """How many Sort operators the join's plan has (2: both sides sorted; 1: only the probe)."""
    plan = df.join(probe, KEY)._jdf.queryExecution().executedPlan().toString()
    return f"{plan.count('Sort [')} Sort" + ("s" if plan.count("Sort [") != 1 else "")


def join_xl(work: Path, args) -> Scenario:
    """The 10M-key join (rows/2 probe keys) against Spark's bucketBy + sortBy table."""
    path = datasets.events(args.rows)
    n = max(1, args.rows // SIZES["XL"])
    probe = _probe(work, path, n, seed=32)
    parquet = _parquet_df(path)
    indexed = _indexed(path)
    bucketed = _bucketed(work, path)
    one_file = _bucketed_one_file(work, path)
    ours = JOIN
    spec = f"bucketBy({datasets.NUM_BUCKETS}, '{KEY}').sortBy('{KEY}')"
    bucket = f"Spark table ({spec}).join(probe, '{KEY}')"
    bucket_one = f"Spark table ({spec}, one file per bucket).join(probe, '{KEY}')"
    base = PARQUET_JOIN
    notes = ["Sort operators in each join's plan (2: Spark sorts both sides; 1: only the probe): "
             + "; ".join(f"{label} {_table_side_sorts(df, probe)}" for label, df in
                         [("indexeddf", indexed), ("bucketBy + sortBy", bucketed),
                          ("bucketBy + sortBy, one file per bucket", one_file), ("parquet", parquet)])
             + ". The session has spark.sql.legacy.bucketedTableScan.outputOrdering=true (indexeddf.configure "
               "sets it): a bucketed scan whose buckets are single sorted files reports its order. Data files: "
             + "; ".join(f"{label} {_parquet_files(d)}" for label, d in
                         [("bucketBy + sortBy", work / "bucketed"),
                          ("bucketBy + sortBy, one file per bucket", work / "bucketed-one-file")])
             + f"; indexeddf {len(IndexedTable.for_path(path).snapshot.live_files())} live files "
               f"({datasets.NUM_BUCKETS} buckets)."]
    return Scenario(
        name="connector_join_XL",
        description=f"{n:,} probe rows (existing keys) joined with {args.rows:,} rows on {KEY}; "
                    "count and sum(amount)",
        baseline=(base, lambda: _query(parquet.join(probe, KEY))),
        candidates=[(ours, lambda: _query(indexed.join(probe, KEY))),
                    (bucket, lambda: _query(bucketed.join(probe, KEY))),
                    (bucket_one, lambda: _query(one_file.join(probe, KEY)))],
        target="see the goals below",
        notes=notes,
        check=_same_aggregates,
        goals=[Goal("indexeddf join no slower than the bucketBy + sortBy table", ours, bucket, 1.0),
               Goal("indexeddf join no slower than the bucketBy + sortBy table with one file per bucket "
                    "(no goal: Spark's strongest layout of the same rows)", ours, bucket_one, 1.0)],
    )


SCENARIOS = {
    "connector_join_S": join_small,
    "connector_join_100": join_hundred,
    "connector_point_lookup": point_lookup,
    "connector_in_list_100": in_list_lookup,
    "connector_full_scan_sum": lambda work, args: _scan(args, "sum"),
    "connector_full_scan_count": lambda work, args: _scan(args, "count"),
    "connector_full_scan_max_string": lambda work, args: _scan(args, "max_string"),
    "connector_join_XL": join_xl,
}
