"""Upserts and deletes: ``IndexedTable.merge`` / ``delete`` against delta-rs's on a copy of
the same table, copy on write and with deletion vectors.

    python benchmarks/changes.py [--rows 20000000] [--buckets 32] [--rounds 3]
                                 [--runs merge:10000,merge:100,delete:200] [--codec zstd]

A MERGE changes its table, so each round runs on a fresh copy of one table (the copy is
not timed) in a child process of its own, which reports the merge's wall time and the
process's peak RSS. The source: half existing random keys (updated), half new keys
(inserted). The anchor is delta-rs's ``DeltaTable.merge(...).when_matched_update_all()
.when_not_matched_insert_all()`` on a copy of the very same table (it is a Delta table).
A ``sql:N`` run times the same upsert as Spark SQL's ``MERGE INTO`` (copy on write and with
deletion vectors, as the connector routes it, and with deletion vectors forced through Spark's
plan) in one Spark session (started before the clock), against delta-rs's MERGE
and the Python API's merge in the same process, and the connector's floor for a query
(``SELECT count(*)`` of an empty indexeddf table).
A ``delete:N`` run deletes the N/2 existing keys instead (``k IN (...)``); a ``reads:N``
run times lookups and a scan after N deletion-vector upserts against the same rows
optimized. The
deletion-vector copy has ``delta.enableDeletionVectors = true`` set before the round
(not timed). Prints one row per engine: median and spread of the wall time, the ratio
to delta-rs, and the largest peak RSS.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
from proctree import cpu_between, tree_cpu

CHUNK_ROWS = 2_000_000

SCENARIOS: list[dict] = []
"""What this run measured, in the form ``chart.py`` draws (``--chart``): a scenario per
operation, its first measurement the anchor."""


def _record(scenario: str, description: str, measurements: list[tuple[str, list[float]]],
            cpu: dict[str, list[float]] | None = None) -> None:
    """Keep one scenario's timings (seconds per round, the anchor's first) for the chart;
    ``cpu``: each measurement's CPU seconds per round, by name, where the run took them."""
    anchor = statistics.median(measurements[0][1])
    rows = []
    for i, (name, secs) in enumerate(measurements):
        med = statistics.median(secs)
        rows.append({"name": name, "median_s": med, "min_s": min(secs), "max_s": max(secs),
                     "median": _shown(med), "min": _shown(min(secs)), "max": _shown(max(secs)),
                     "ratio_median": med / anchor, "ratio": "baseline" if i == 0 else f"{med / anchor:.2f}x"})
        if cpu and cpu.get(name):
            rows[-1]["cpu_median"] = f"{statistics.median(cpu[name]):.1f} CPU-s"
    SCENARIOS.append({"scenario": scenario, "description": description, "measurements": rows})


def _shown(seconds: float) -> str:
    """A time as benchmarks/run.py prints it: ms under a second, else seconds."""
    return f"{seconds * 1000:.1f} ms" if seconds < 1 else f"{seconds:.2f} s"


def _rows(start: int, n: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    letters = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz0123456789", dtype="S1")
    s = rng.choice(letters, size=(n, 64)).view("S64").ravel().astype(str)
    return pa.table({"k": pa.array(np.arange(start, start + n, dtype=np.int64)),
                     "v": pa.array(rng.integers(0, 1 << 40, n, dtype=np.int64)), "s": pa.array(s)})


def build(path: Path, rows: int, buckets: int, chunk_rows: int = CHUNK_ROWS, optimize: bool = True,
          codec: str = "zstd", properties: dict[str, str] | None = None) -> None:
    """The table: ``rows`` keys 0..rows-1 written in chunks of ``chunk_rows`` (one create, then
    appends; each writes a file per bucket), then (``optimize``) one file per bucket; its files
    compressed with ``codec`` (``indexeddf.parquet.compressionCodec``); ``properties``: more of the
    table's properties at create."""
    from indexeddf import IndexedTable

    t = None
    for start in range(0, rows, chunk_rows):
        chunk = _rows(start, min(chunk_rows, rows - start), start)
        if t is None:
            t = IndexedTable.create(str(path), chunk, ["k"], num_buckets=buckets,
                                    properties={"indexeddf.parquet.compressionCodec": codec, **(properties or {})})
        else:
            t.append(chunk)
    if optimize:
        t.optimize(mode="full")  # one sorted file per bucket, as a maintained table has


def source(rows: int, n: int, seed: int = 11) -> pa.Table:
    """``n`` source rows: half random existing keys, half new ones."""
    rng = np.random.default_rng(seed)
    old = rng.choice(rows, n // 2, replace=False).astype(np.int64)
    new = np.arange(rows, rows + n - n // 2, dtype=np.int64)
    out = _rows(0, n, seed + 1)
    return out.set_column(0, "k", pa.array(np.concatenate([old, new])))


def child(engine: str, path: str, source_path: str, op: str = "merge") -> None:
    """One merge (or delete), in this process: prints its wall time and the peak RSS as JSON."""
    import pyarrow.parquet as pq

    src = pq.read_table(source_path)
    # Imported before the clock starts, for both engines: a pipeline's process has them.
    import deltalake  # noqa: F401

    import indexeddf.changes  # noqa: F401
    if op == "delete":
        keys = ", ".join(map(str, src.column("k").to_pylist()[: src.num_rows // 2]))
    t0 = time.perf_counter()
    if op == "delete" and engine == "indexeddf":
        from indexeddf import IndexedTable

        t = IndexedTable.for_path(path)
        before = t.version
        t.delete(f"k IN ({keys})")
        counts = (t.history(limit=1)[0].metrics.get("numDeletedRows"), 0) if t.version > before else (0, 0)
    elif op == "delete":
        import deltalake

        m = deltalake.DeltaTable(path).delete(f"k IN ({keys})")
        counts = (m["num_deleted_rows"], 0)
    elif engine == "floor":
        counts = layout_floor(path, src)
    elif engine == "indexeddf":
        from indexeddf import IndexedTable

        m = IndexedTable.for_path(path).merge(src, "t.k = s.k", source_alias="s", target_alias="t") \
            .when_matched_update_all().when_not_matched_insert_all().execute()
        counts = (m["num_target_rows_updated"], m["num_target_rows_inserted"])
    else:
        import deltalake

        m = deltalake.DeltaTable(path).merge(src, predicate="t.k = s.k", source_alias="s", target_alias="t") \
            .when_matched_update_all().when_not_matched_insert_all().execute()
        counts = (m["num_target_rows_updated"], m["num_target_rows_inserted"])
    seconds = time.perf_counter() - t0
    # VmHWM, not ru_maxrss: Linux carries ru_maxrss across exec, so a child would report
    # the parent's peak (the table's build).
    peak = next(int(line.split()[1]) * 1024 for line in open("/proc/self/status") if line.startswith("VmHWM:"))
    print(json.dumps({"seconds": seconds, "peak_rss": peak, "updated": counts[0], "inserted": counts[1]}))


def layout_floor(path: str, src: pa.Table) -> tuple[int, int]:
    """The reads and writes an upsert with deletion vectors needs in this table layout,
    done with pyarrow alone (no checks, no log replay beyond the snapshot, no deletion
    vector, no commit): per touched bucket, the index row groups that can hold the keys'
    hashes, the key column of the data row groups their entries point into, one new data
    file and one new index file; the buckets on two threads, as the machine has two cores.
    What no implementation of this layout in Python can go under; returns (matched rows, 0)."""
    from concurrent.futures import ThreadPoolExecutor

    from indexeddf import IndexedTable
    from indexeddf.spec.bucketing import bucket_ids, key_hash

    snap = IndexedTable.for_path(path).snapshot
    index = snap.indexes["primary"]
    keys = src.column("k")
    hashes, buckets = key_hash([keys]), bucket_ids([keys], index.numBuckets)
    files = {a.fileId: a.path for a in snap.live_files()}
    with ThreadPoolExecutor(2) as pool:
        matched = sum(pool.map(lambda b: _floor_bucket(snap.storage.full(""), index, files, src, hashes, buckets, int(b)),
                               np.unique(buckets)))
    return matched, 0


def _floor_bucket(root: str, index, files: dict[int, str], src: pa.Table, hashes: np.ndarray, buckets: np.ndarray,
                  b: int) -> int:
    """:func:`layout_floor`'s work for bucket ``b``: its reads, then its two files."""
    import io
    import os

    import pyarrow.parquet as pq

    probes = np.unique(hashes[buckets == b])
    matched = 0
    for f in (f for f in index.files if f.bucket == b):
        pf = pq.ParquetFile(os.path.join(root, f.path))
        meta = pf.metadata
        stats = [meta.row_group(i).column(0).statistics for i in range(meta.num_row_groups)]
        groups = [i for i, st in enumerate(stats) if np.any((probes >= st.min) & (probes <= st.max))]
        entries = pf.read_row_groups(groups, use_threads=False)
        h = entries.column("hash").to_numpy()
        at = np.flatnonzero(np.isin(h, probes))
        for fid in np.unique(entries.column("file_id").to_numpy()[at]):
            rows = entries.column("row").to_numpy()[at]
            data = pq.ParquetFile(os.path.join(root, files[int(fid)]))
            bounds = np.cumsum([0] + [data.metadata.row_group(i).num_rows for i in range(data.metadata.num_row_groups)])
            wanted = np.unique(np.searchsorted(bounds, rows, "right") - 1).tolist()
            data.read_row_groups(wanted, columns=["k"], use_threads=False)
            matched += len(rows)
    rows_b = src.filter(pa.array(buckets == b))
    for name, table in (("data", rows_b), ("index", pa.table({"hash": pa.array(hashes[buckets == b], pa.uint32())}))):
        buf = io.BytesIO()
        pq.write_table(table, buf, compression="zstd")
        with open(os.path.join(root, f"floor-{name}-{b}.parquet"), "wb") as out:
            out.write(buf.getvalue())
    return matched


def run(args) -> None:
    from indexeddf import IndexedTable

    work = Path(tempfile.mkdtemp(prefix="changes-bench-", dir=args.work))
    try:
        table = work / "table"
        t0 = time.perf_counter()
        build(table, args.rows, args.buckets, codec=args.codec)
        print(f"table: {args.rows:,} rows, {args.buckets} buckets, {args.codec} files, built in "
              f"{time.perf_counter() - t0:.0f} s")
        for spec in args.runs.split(","):
            op, n = spec.split(":")
            if op == "reads":
                _reads_after_merges(table, work, args, int(n), IndexedTable)
            elif op == "sql":
                _sql_merges(table, work, args, int(n))
            else:
                _run_one(table, work, args, op, int(n), IndexedTable)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _reads_after_merges(table: Path, work: Path, args, merges: int, IndexedTable) -> None:
    """Lookups and a scan after ``merges`` deletion-vector upserts of 1,000 rows, against
    the same rows optimized (no deletion vector, one file a bucket), in this process,
    warm (the median of 20 repetitions after one untimed)."""
    changed = work / "changed"
    shutil.rmtree(changed, ignore_errors=True)
    shutil.copytree(table, changed)
    t = IndexedTable.for_path(str(changed))
    t.set_properties({"delta.enableDeletionVectors": "true"})
    for i in range(merges):
        t.merge(source(args.rows, 1000, seed=100 + i), "t.k = s.k", source_alias="s", target_alias="t") \
            .when_matched_update_all().when_not_matched_insert_all().execute()
    optimized = work / "optimized"
    shutil.rmtree(optimized, ignore_errors=True)
    shutil.copytree(changed, optimized)
    o = IndexedTable.for_path(str(optimized))
    o.optimize(mode="full")
    rng = np.random.default_rng(5)
    keys = [rng.choice(args.rows, 100, replace=False).tolist() for _ in range(21)]

    def timed(fn) -> list[float]:
        fn(0)
        secs = []
        for i in range(1, 21):
            t0 = time.perf_counter()
            fn(i)
            secs.append(time.perf_counter() - t0)
        return secs

    dv_files = sum(a.deletionVector is not None for a in t.snapshot.live_files())
    print(f"\nreads after {merges} deletion-vector upserts of 1,000 rows ({dv_files} files with a deletion vector, "
          f"{len(t.snapshot.live_files())} files) vs the same rows optimized ({len(o.snapshot.live_files())} files)")
    print(f"{'read':<36} {'optimized ms':>13} {'after merges ms':>16} {'ratio':>7}")
    for name, fn in (("lookup of 100 random keys", lambda tab: (lambda i: tab.lookup(keys[i]))),
                     ("to_arrow(columns=['v']) (a scan)", lambda tab: (lambda i: tab.to_arrow(columns=["v"]))),
                     ("floor: pyarrow.dataset of the files", lambda tab: (lambda i: _dataset_read(tab)))):
        base_secs, after_secs = timed(fn(o)), timed(fn(t))
        base, after = statistics.median(base_secs), statistics.median(after_secs)
        print(f"{name:<36} {base * 1000:>13.1f} {after * 1000:>16.1f} {after / base:>6.2f}x")
        _record(f"reads:{merges}", f"{name} after {merges} deletion-vector upserts",
                [("optimized", base_secs), (f"after {merges} merges", after_secs)])
    assert t.to_arrow(columns=["k"]).num_rows == o.to_arrow(columns=["k"]).num_rows
    sys.stdout.flush()


def _dataset_read(t) -> pa.Table:
    """Column ``v`` of the table's live files read by ``pyarrow.dataset`` alone (deletion
    vectors not applied): what a scan of that many files costs in Arrow, the scan's floor."""
    import pyarrow.dataset as ds

    snap = t.snapshot
    paths = [snap.storage.full(a.path) for a in snap.live_files()]
    return ds.dataset(paths, format="parquet", filesystem=snap.storage.arrow_filesystem()).to_table(columns=["v"])


def _run_one(table: Path, work: Path, args, op: str, n: int, IndexedTable) -> None:
    """``args.rounds`` rounds of one operation by each engine, and the table of results."""
    import pyarrow.parquet as pq

    src = work / f"source-{n}.parquet"
    pq.write_table(source(args.rows, n), src)
    results: dict[str, list[dict]] = {"delta-rs": [], "indexeddf": [], "indexeddf, deletion vectors": []}
    if op == "merge":
        results["floor: the layout's I/O"] = []
    for _ in range(args.rounds):
        for name in results:
            copy = work / "copy"
            shutil.rmtree(copy, ignore_errors=True)
            shutil.copytree(table, copy)
            if name.endswith("deletion vectors"):
                IndexedTable.for_path(str(copy)).set_properties({"delta.enableDeletionVectors": "true"})
            os.sync()  # the copy's dirty pages are written now, not during the timed operation
            engine = "floor" if name.startswith("floor") else name.split(",")[0]
            out = subprocess.run([sys.executable, __file__, "--child", engine, str(copy), str(src), op],
                                 capture_output=True, text=True, check=True).stdout
            results[name].append(json.loads(out.strip().splitlines()[-1]))
    anchor = statistics.median(r["seconds"] for r in results["delta-rs"])
    what = (f"upsert of {n:,} source rows ({n // 2:,} matched random keys, {n - n // 2:,} new)" if op == "merge"
            else f"DELETE ... WHERE k IN ({n // 2:,} random keys)")
    print(f"\n{what}, {args.rounds} rounds")
    print(f"{'engine':<28} {'median s':>9} {'min..max s':>14} {'vs delta-rs':>12} {'peak RSS MiB':>13}")
    for engine, rs in results.items():
        secs = [r["seconds"] for r in rs]
        med = statistics.median(secs)
        print(f"{engine:<28} {med:>9.3f} {min(secs):>6.3f}..{max(secs):<6.3f} {anchor / med:>11.2f}x "
              f"{max(r['peak_rss'] for r in rs) / 2**20:>13.0f}")
        want = (n // 2, n - n // 2) if op == "merge" else (n // 2, 0)
        if engine.startswith("floor"):
            continue  # its rows are hash matches, not verified keys
        assert all((r["updated"], r["inserted"]) == want for r in rs), rs
    _record(f"{op}:{n}", what, [(name, [r["seconds"] for r in rs]) for name, rs in results.items()])
    sys.stdout.flush()


SQL_MERGE = ("MERGE INTO indexeddf.`{path}` AS t USING src AS s ON t.k = s.k "
             "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *")


def sql_child(table: str, work: str, source_path: str, rounds: int) -> None:
    """``rounds`` upserts, each on a fresh copy of the table: Spark SQL's MERGE INTO copy on
    write and with deletion vectors, the Python API's merge with deletion vectors, and
    delta-rs's MERGE (the anchor), plus the connector's query floor, in one Spark session;
    prints the times as JSON."""
    import deltalake
    import pyarrow.parquet as pq

    import indexeddf
    from indexeddf import IndexedTable

    spark = indexeddf.local_session("indexeddf-changes-benchmark", driver_memory="4g")
    assert indexeddf.register(spark) == indexeddf.spark.CONNECTOR
    spark.read.parquet(source_path).createOrReplaceTempView("src")
    src = pq.read_table(source_path)
    empty = Path(work) / "empty"
    shutil.rmtree(empty, ignore_errors=True)  # a run of another size left its own
    IndexedTable.create(str(empty), src.schema.empty_table(), ["k"], num_buckets=2)
    want = (src.num_rows // 2, src.num_rows - src.num_rows // 2)
    out: dict[str, list[float]] = {k: [] for k in SQL_ENGINES}
    out["floor"] = []
    cpu: dict[str, list[float]] = {k: [] for k in SQL_ENGINES}
    for _ in range(rounds + 1):  # the first round warms the session up and is dropped
        times, spent = {}, {}
        for how in SQL_ENGINES:
            copy = Path(work) / "copy"
            shutil.rmtree(copy, ignore_errors=True)
            shutil.copytree(table, copy)
            if how.endswith("dv"):
                IndexedTable.for_path(str(copy)).set_properties({"delta.enableDeletionVectors": "true"})
            os.sync()
            before = tree_cpu()
            t0 = time.perf_counter()
            if how == "spark-join":
                _spark_join(spark, copy, work)
            elif how.startswith("sql"):
                # sql-plan: Spark's plan even for a source the Python engine would take
                spark.conf.set("spark.indexeddf.merge.engineMaxSourceBytes", "-1" if how.startswith("sql-plan")
                               else spark.conf.get("spark.sql.autoBroadcastJoinThreshold"))
                spark.sql(SQL_MERGE.format(path=copy)).collect()
                spark.conf.unset("spark.indexeddf.merge.engineMaxSourceBytes")
            elif how.startswith("python"):
                IndexedTable.for_path(str(copy)).merge(src, "t.k = s.k", source_alias="s", target_alias="t") \
                    .when_matched_update_all().when_not_matched_insert_all().execute()
            else:
                m = deltalake.DeltaTable(str(copy)).merge(src, "t.k = s.k", source_alias="s", target_alias="t") \
                    .when_matched_update_all().when_not_matched_insert_all().execute()
            times[how] = time.perf_counter() - t0
            spent[how] = cpu_between(before, tree_cpu())
            if how == "spark-join":
                continue
            if how == "delta-rs":
                assert (m["num_target_rows_updated"], m["num_target_rows_inserted"]) == want, m
                continue
            m = IndexedTable.for_path(str(copy)).history(limit=1)[0].metrics
            assert (m["numTargetRowsUpdated"], m["numTargetRowsInserted"]) == want, m
        t0 = time.perf_counter()
        spark.sql(f"SELECT count(*) FROM indexeddf.`{empty}`").collect()
        times["floor"] = time.perf_counter() - t0
        for k, v in times.items():
            out[k].append(v)
        for k, v in spent.items():
            cpu[k].append(v)
    print(json.dumps({**{k: v[1:] for k, v in out.items()}, "cpu": {k: v[1:] for k, v in cpu.items()}}))
    spark.stop()


def _spark_join(spark, table: Path, work: str) -> None:
    """Spark's own plan of the upsert's work with no index and no bucketing: the table's files
    read as plain Parquet (the key and each row's file and ordinal), joined with the source, and
    the outcome (the source's rows, and the matched rows' file and ordinal: what a MERGE with
    deletion vectors writes) written as Parquet."""
    out = Path(work) / "spark-join-out"
    shutil.rmtree(out, ignore_errors=True)
    target = spark.read.parquet(str(table / "data")).selectExpr(
        "k AS target_k", "_metadata.file_path AS target_file", "_metadata.row_index AS target_row")
    src = spark.table("src")
    src.join(target, src.k == target.target_k, "left_outer").drop("target_k").write.parquet(str(out))
    shutil.rmtree(out, ignore_errors=True)


SQL_ENGINES = ("delta-rs", "sql", "sql-dv", "sql-plan-dv", "python-dv", "spark-join")
"""The upserts a ``sql:N`` run times, the anchor first: delta-rs's MERGE, Spark SQL's MERGE
INTO copy on write and with deletion vectors (a small source goes to the Python engine), the
same with deletion vectors always through Spark's plan, the Python API's merge with deletion
vectors."""
SQL_NAMES = {"delta-rs": "delta-rs MERGE (anchor)", "sql": "Spark SQL MERGE INTO, copy on write",
             "sql-dv": "Spark SQL MERGE INTO, deletion vectors",
             "sql-plan-dv": "Spark SQL MERGE INTO, DV, Spark's plan",
             "python-dv": "Python API merge, deletion vectors",
             "spark-join": "Spark's own join + write, plain Parquet",
             "floor": "connector query floor (empty table)"}


def _sql_merges(table: Path, work: Path, args, n: int) -> None:
    """The upsert as Spark SQL against delta-rs's MERGE, with the Python API's and the query floor."""
    import pyarrow.parquet as pq

    src = work / f"source-{n}.parquet"
    pq.write_table(source(args.rows, n), src)
    out = subprocess.run([sys.executable, __file__, "--sql-child", str(table), str(work), str(src), str(args.rounds)],
                         capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(out.stderr[-3000:])
    r = json.loads(out.stdout.strip().splitlines()[-1])
    anchor = statistics.median(r["delta-rs"])
    print(f"\nSpark SQL MERGE INTO, upsert of {n:,} source rows, {args.rounds} rounds (one warm Spark session)")
    print(f"{'what':<44} {'median s':>9} {'min..max s':>14} {'vs delta-rs':>12} {'CPU s':>7}")
    for key in (*SQL_ENGINES, "floor"):
        med = statistics.median(r[key])
        spent = f"{statistics.median(r['cpu'][key]):>7.1f}" if r["cpu"].get(key) else ""
        print(f"{SQL_NAMES[key]:<44} {med:>9.3f} {min(r[key]):>6.3f}..{max(r[key]):<6.3f} {anchor / med:>11.2f}x {spent}")
    _record(f"sql:{n}", f"Spark SQL MERGE INTO of {n:,} source rows against delta-rs",
            [(SQL_NAMES[k], r[k]) for k in (*SQL_ENGINES, "floor")],
            {SQL_NAMES[k]: v for k, v in r["cpu"].items()})
    sys.stdout.flush()


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(*sys.argv[2:6])
        return
    if len(sys.argv) > 1 and sys.argv[1] == "--sql-child":
        sql_child(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
        return
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=20_000_000)
    p.add_argument("--buckets", type=int, default=32)
    p.add_argument("--runs", default="merge:10000,merge:100,delete:200",
                   help="comma-separated OP:N: merge (N source rows), sql (the same upsert as Spark SQL), delete (N/2 keys), or reads (lookups "
                        "and a scan after N deletion-vector upserts, against the same rows optimized)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--codec", default="zstd",
                   help="the table's indexeddf.parquet.compressionCodec (snappy: what delta-rs writes)")
    p.add_argument("--work", default=None, help="folder for the tables (default: the system's temp folder)")
    p.add_argument("--chart", default=None, metavar="PNG",
                   help="also draw the run's timings (benchmarks/chart.py) into PNG, and write them beside it as JSON")
    args = p.parse_args()
    run(args)
    if args.chart:
        import platform

        from chart import draw

        results = {"machine": f"{platform.machine()}, {os.cpu_count()} cores", "label": f"changes.py --rows {args.rows:,}",
                   "results": SCENARIOS}
        Path(args.chart).with_suffix(".json").write_text(json.dumps(results, indent=1) + "\n")
        print(draw(results, args.chart))


if __name__ == "__main__":
    main()
