"""Streams and the change data feed: what a pipeline pays for reading a table as a stream and
for writing and reading its change data feed.

    python benchmarks/feed.py [--rows 20000000] [--buckets 32] [--rounds 5] [--parts stream,merge,read]
                              [--modes cow,dv] [--page-size 64kb] [--work DIR]
                              [--out benchmarks/results/DATE-feed-ROWS.json | -]

On the check table of benchmarks/changes.py (``k`` bigint, ``v`` bigint, ``s`` 64 characters; one
sorted file a bucket), in one Spark session (local[2], started before any clock):

- ``stream``: a stream of the table's appends (``readStream.format("indexeddf")``, startingVersion
  ``latest``, a ``noop`` sink) against Spark's file-stream source (``readStream.parquet(dir)``)
  over the same new Parquet files (copied into its folder). Each round appends one 1,000-row
  commit and runs ``processAllAvailable`` on each query; the time is Spark's own
  ``triggerExecution`` of the micro-batches that read the 1,000 rows (the batch from start to
  end: offsets, planning, the read, the commit to the checkpoint).
- ``merge``: a 10,000-row upsert (half matched random keys, half new) with the feed on against the
  same upsert with it off, on two copies of the table that stay identical (the same sources in
  the same order), copy on write and with deletion vectors, through the Python API
  (``IndexedTable.merge``), Spark SQL's ``MERGE INTO`` as the connector routes it (a small source
  goes to the Python engine) and Spark SQL forced through Spark's plan. ``--modes dv``: only the
  deletion-vector copies (copy on write rewrites every file each round). ``--page-size 64kb``: the
  table's files written with data pages of that size and the page index
  (``indexeddf.parquet.pageSize``, set at create), so both copies read pre-images by pages.
- ``read``: the feed of ten 1,000-row upserts (copy on write) read whole: ``IndexedTable.changes``
  and Spark's ``readChangeFeed`` read (``toArrow``) against delta-rs's
  ``DeltaTable.load_cdf(starting_version, ending_version)`` read to Arrow, each engine's table
  held by the process (warm: ours opened before the ten commits, delta-rs's at the newest; the
  baseline) and opened in the clock (cold), beside the floors (benchmarks/feed_floor.py): Spark's
  own read of the change files, pyarrow's read of them (paths known), and that read after the
  commits' ``cdc`` lines are parsed; every answer is checked against delta-rs's rows.

Prints a table a part with the medians, the median of the per-round ratios and the goal, and
writes what it printed into a results JSON (``--out -``: none). The first round of every part
warms up and is dropped.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from changes import _rows, build, source

ROOT = Path(__file__).resolve().parent.parent
PRINTED: list[str] = []
"""Every line the run printed, for the results JSON."""


def say(line: str = "") -> None:
    """Print a line and keep it for the results JSON."""
    print(line, flush=True)
    PRINTED.append(line)


def table_rows(title: str, rows: list[tuple[str, list[float], list[float] | None]], goal: str,
               digits: int = 3) -> None:
    """One part's table: each row's median and spread in seconds (``digits`` decimals), and the
    median of its per-round ratios to the part's baseline (``None``: the row is the baseline)."""
    say()
    say(title)
    say(f"{'what':<52} {'median s':>9} {'min..max s':>15} {'ratio':>7}")
    for name, secs, ratios in rows:
        ratio = "base" if ratios is None else f"{statistics.median(ratios):.2f}x"
        say(f"{name:<52} {statistics.median(secs):>9.{digits}f} {min(secs):>7.{digits}f}..{max(secs):<7.{digits}f} "
            f"{ratio:>7}")
    say(goal)


# -- a stream of the table's appends ----------------------------------------------------------
def _batch_seconds(query, after: int) -> tuple[float, int, int]:
    """The ``triggerExecution`` seconds and input rows of the query's micro-batches after batch
    ``after`` that read rows, and its newest batch id."""
    seconds, rows, newest = 0.0, 0, after
    for p in query.recentProgress:
        if p["batchId"] > after:
            newest = max(newest, p["batchId"])
            if p["numInputRows"]:
                seconds += p["durationMs"]["triggerExecution"] / 1000
                rows += p["numInputRows"]
    return seconds, rows, newest


def stream_part(spark, table: Path, work: Path, args) -> None:
    """A 1,000-row commit read by a stream of the table against Spark's file stream of its files."""
    from indexeddf import IndexedTable

    path = work / "stream-table"
    shutil.copytree(table, path)
    files = work / "stream-files"
    files.mkdir()
    t = IndexedTable.for_path(str(path))
    ours = (spark.readStream.format("indexeddf").option("startingVersion", "latest").load(str(path))
            .writeStream.format("noop").option("checkpointLocation", str(work / "ck-ours")).start())
    schema = spark.read.format("indexeddf").load(str(path)).schema
    theirs = (spark.readStream.schema(schema).parquet(str(files))
              .writeStream.format("noop").option("checkpointLocation", str(work / "ck-files")).start())
    ours.processAllAvailable()
    theirs.processAllAvailable()
    seen = {"ours": -1, "files": -1}
    times: dict[str, list[float]] = {"ours": [], "files": []}
    try:
        for r in range(args.rounds + 1):
            version = t.append(_rows(args.rows + r * 1000, 1000, 1000 + r))
            ours.processAllAvailable()
            _copy_added(path, version, files, r)
            theirs.processAllAvailable()
            for name, q in (("ours", ours), ("files", theirs)):
                secs, n, seen[name] = _batch_seconds(q, seen[name])
                assert n == 1000, (name, n)
                if r:
                    times[name].append(secs)
    finally:
        ours.stop()
        theirs.stop()
        shutil.rmtree(path, ignore_errors=True)
    ratios = [a / b for a, b in zip(times["ours"], times["files"])]
    n_files = len(list(files.glob("*.parquet"))) // (args.rounds + 1)
    table_rows(f"a stream's micro-batch of one 1,000-row commit ({n_files} files), {args.rounds} rounds "
               "(Spark's triggerExecution)",
               [("Spark file stream, readStream.parquet (baseline)", times["files"], None),
                ("indexeddf stream, readStream.format(\"indexeddf\")", times["ours"], ratios)],
               f"goal: within 1.5x of the file stream: {'met' if statistics.median(ratios) <= 1.5 else 'not met'}")


def _copy_added(table: Path, version: int, folder: Path, r: int) -> None:
    """The Parquet files commit ``version`` added, copied into the file stream's folder (written
    under a hidden name, then renamed: the file source never lists a partial file)."""
    log = table / "_delta_log" / f"{version:020d}.json"
    for i, line in enumerate(log.read_text().splitlines()):
        add = json.loads(line).get("add")
        if add:
            hidden = folder / f".part-{r}-{i}.parquet"
            shutil.copyfile(table / add["path"], hidden)
            os.rename(hidden, folder / f"part-{r}-{i}.parquet")


# -- a MERGE with the feed on against it off --------------------------------------------------
SQL_MERGE = ("MERGE INTO indexeddf.`{path}` AS t USING feed_src AS s ON t.k = s.k "
             "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *")
WAYS = {"python": "Python API merge", "sql": "Spark SQL MERGE INTO", "sql-plan": "Spark SQL MERGE INTO, Spark's plan"}


def _merge(spark, how: str, path: Path, src: pa.Table) -> None:
    """One upsert of ``src`` into the table at ``path``, the way ``how`` names."""
    from indexeddf import IndexedTable

    if how == "python":
        IndexedTable.for_path(str(path)).merge(src, "t.k = s.k", source_alias="s", target_alias="t") \
            .when_matched_update_all().when_not_matched_insert_all().execute()
        return
    # sql-plan: Spark's plan even for a source the Python engine would take (as changes.py forces it)
    spark.conf.set("spark.indexeddf.merge.engineMaxSourceBytes", "-1" if how == "sql-plan"
                   else spark.conf.get("spark.sql.autoBroadcastJoinThreshold"))
    try:
        spark.sql(SQL_MERGE.format(path=path)).collect()
    finally:
        spark.conf.unset("spark.indexeddf.merge.engineMaxSourceBytes")


def merge_part(spark, table: Path, work: Path, args) -> None:
    """A 10,000-row upsert with the feed on against it off, every mode and way."""
    from indexeddf import IndexedTable

    copies = {}
    modes = args.modes.split(",")
    for mode in modes:
        for feed in ("off", "on"):
            copies[mode, feed] = work / f"merge-{mode}-{feed}"
            shutil.copytree(table, copies[mode, feed])
            props = {"delta.enableChangeDataFeed": "true"} if feed == "on" else {}
            if mode == "dv":
                props["delta.enableDeletionVectors"] = "true"
            if props:
                IndexedTable.for_path(str(copies[mode, feed])).set_properties(props)
    times = {(mode, how, feed): [] for mode in modes for how in WAYS for feed in ("off", "on")}
    total = args.rows
    for r in range(args.rounds + 1):
        for how in WAYS:
            # a new source each round and way (the tables change), the same for off and on
            src = source(total, 10_000, seed=300 + r * len(WAYS) + list(WAYS).index(how))
            total += 10_000 - 10_000 // 2
            pq.write_table(src, work / "feed_src.parquet")
            spark.read.parquet(str(work / "feed_src.parquet")).createOrReplaceTempView("feed_src")
            for mode in modes:
                for feed in ("off", "on"):
                    os.sync()  # the previous change's pages are written now, not in the timed one
                    t0 = time.perf_counter()
                    _merge(spark, how, copies[mode, feed], src)
                    if r:
                        times[mode, how, feed].append(time.perf_counter() - t0)
    _check_merges(copies, args.rounds + 1)
    for copy in copies.values():  # every copy-on-write round rewrote each file: the disk's, not the run's
        shutil.rmtree(copy, ignore_errors=True)
    rows = []
    for mode, label in (("cow", "copy on write"), ("dv", "deletion vectors")):
        if mode not in modes:
            continue
        for how, name in WAYS.items():
            off, on = times[mode, how, "off"], times[mode, how, "on"]
            rows.append((f"{name}, {label}, feed off", off, None))
            rows.append((f"{name}, {label}, feed on", on, [b / a for a, b in zip(off, on)]))
    worst = max(statistics.median([b / a for a, b in zip(times[k[:2] + ("off",)], times[k])])
                for k in times if k[2] == "on")
    table_rows(f"a 10,000-row upsert (5,000 matched, 5,000 new) with the change data feed on vs off, {args.rounds} rounds",
               rows, f"goal: feed on at most 1.3x of feed off: {'met' if worst <= 1.3 else 'not met'} (worst {worst:.2f}x)")


def _check_merges(copies: dict, merges: int) -> None:
    """The feed-on copies hold the feed-off copies' rows (DuckDB's delta extension reads both), and
    delta-rs reads every copy-on-write merge's changes from the feed (5,000 updates and 5,000
    inserts each; delta-rs reads no table with deletion vectors)."""
    from deltalake import DeltaTable

    con = _duckdb_delta()
    for mode in sorted({m for m, _ in copies}):
        off, on = (str(copies[mode, f]) for f in ("off", "on"))
        differ = con.execute(f"SELECT count(*) FROM ((SELECT k, v FROM delta_scan('{off}') EXCEPT ALL "
                             f"SELECT k, v FROM delta_scan('{on}')) UNION ALL (SELECT k, v FROM delta_scan('{on}') "
                             f"EXCEPT ALL SELECT k, v FROM delta_scan('{off}')))").fetchone()[0]
        assert differ == 0, (mode, differ)
        if mode == "cow":
            table = DeltaTable(on)
            feed = pa.table(table.load_cdf(starting_version=table.version() - merges * len(WAYS) + 1).read_all())
            kinds = feed["_change_type"].to_pylist()
            n = merges * len(WAYS) * 5000
            assert {k: kinds.count(k) for k in set(kinds)} == {"insert": n, "update_preimage": n, "update_postimage": n}


def _duckdb_delta():
    """DuckDB with its delta extension (delta-kernel-rs) loaded from the duckdb-extension-delta
    package's file, as tests/oracles.py loads it (no download)."""
    import glob

    import duckdb
    import duckdb_extension_delta

    ext = glob.glob(os.path.join(os.path.dirname(duckdb_extension_delta.__file__), "extensions", "*",
                                 "delta.duckdb_extension"))
    con = duckdb.connect(config={"allow_unsigned_extensions": "true", "autoinstall_known_extensions": "false"})
    con.execute(f"LOAD '{ext[0]}'")
    return con


# -- reading the feed of ten upserts ----------------------------------------------------------
def read_part(spark, table: Path, work: Path, args) -> None:
    """The feed of ten 1,000-row upserts read whole by indexeddf (Python, Spark) and delta-rs,
    each engine's table held by the process (warm) and opened in the clock (cold), beside the
    floor of this process (benchmarks/feed_floor.py)."""
    from deltalake import DeltaTable
    from feed_floor import commits_floor, files_floor

    from indexeddf import IndexedTable

    path = work / "read-table"
    shutil.copytree(table, path)
    t = IndexedTable.for_path(str(path))
    t.set_properties({"delta.enableChangeDataFeed": "true"})
    first = t.version + 1
    for i in range(10):
        t.merge(source(args.rows + i * 500, 1000, seed=500 + i), "t.k = s.k", source_alias="s", target_alias="t") \
            .when_matched_update_all().when_not_matched_insert_all().execute()
    last = t.version
    changed = sorted(str(f) for f in (path / "_change_data").rglob("*.parquet"))
    # Warm: a pipeline's table object, opened before the ten commits it is then asked about
    # (ours at version first - 1: the commits are new to it); delta-rs's opened at the newest.
    held = IndexedTable.for_path(str(path), version=first - 1)
    held_theirs = DeltaTable(str(path))
    reads = {
        "delta-rs": lambda: pa.table(held_theirs.load_cdf(starting_version=first, ending_version=last).read_all()),
        "delta-rs-cold": lambda: pa.table(
            DeltaTable(str(path)).load_cdf(starting_version=first, ending_version=last).read_all()),
        "python": lambda: held.changes(first, last),
        "python-cold": lambda: IndexedTable.for_path(str(path)).changes(first, last),
        "spark": lambda: spark.read.format("indexeddf").option("readChangeFeed", "true")
        .option("startingVersion", first).option("endingVersion", last).load(str(path)).toArrow(),
        # The floor of the Spark read: Spark's own Parquet read of the same change files.
        "spark-floor": lambda: spark.read.parquet(*changed).toArrow(),
        # The floor of this process: the files alone (paths known), then the commits read too.
        "files-floor": lambda: files_floor(changed),
        "floor": lambda: files_floor(commits_floor(path, first, last)),
    }
    times = {k: [] for k in reads}
    for r in range(args.rounds + 1):
        got = {}
        for name, read in reads.items():
            t0 = time.perf_counter()
            got[name] = read()
            if r:
                times[name].append(time.perf_counter() - t0)
        for floor in ("spark-floor", "files-floor", "floor"):  # every change is in the files
            assert got.pop(floor).num_rows == got["delta-rs"].num_rows, floor
        _same_feed(got)
    n = got["delta-rs"].num_rows

    def ratios(name: str, to: str = "delta-rs") -> list[float]:
        return [a / b for a, b in zip(times[name], times[to])]

    table_rows(f"reading the change data feed of ten 1,000-row upserts ({n:,} rows), {args.rounds} rounds",
               [("delta-rs load_cdf(...).read_all(), table held (baseline)", times["delta-rs"], None),
                ("delta-rs DeltaTable(path).load_cdf(...), cold", times["delta-rs-cold"], ratios("delta-rs-cold")),
                ("IndexedTable.changes(a, b), table held (warm)", times["python"], ratios("python")),
                ("IndexedTable.for_path(p).changes(a, b), cold", times["python-cold"], ratios("python-cold")),
                ("Spark readChangeFeed read, toArrow()", times["spark"], ratios("spark")),
                ("Spark's own read of the change files, toArrow() (floor)", times["spark-floor"],
                 ratios("spark-floor")),
                ("floor: pyarrow.dataset of the change files, paths known", times["files-floor"],
                 ratios("files-floor")),
                ("floor: the commits' cdc lines parsed, then those files", times["floor"], ratios("floor"))],
               "goal: at least 5x faster than delta-rs, tables held (ratio at most 0.20x): "
               + ", ".join(f"{w} {'met' if statistics.median(ratios(w)) <= 0.2 else 'not met'}"
                           for w in ("python", "spark")), digits=4)
    say(f"IndexedTable.changes to the floor (commits + files): {statistics.median(ratios('python', 'floor')):.2f}x "
        f"warm, {statistics.median(ratios('python-cold', 'floor')):.2f}x cold; the floor to delta-rs held: "
        f"{statistics.median(ratios('floor')):.2f}x")


def _same_feed(got: dict[str, pa.Table]) -> None:
    """Every read gives delta-rs's rows: (k, v, s, _change_type, _commit_version), sorted."""
    def rows(t: pa.Table) -> list[tuple]:
        cols = [t[c].to_pylist() for c in ("k", "v", "s", "_change_type")]
        return sorted(zip(*cols, (int(v) for v in t["_commit_version"].to_pylist())))

    want = rows(got["delta-rs"])
    for name, t in got.items():
        assert rows(t) == want, name


# -- the run ----------------------------------------------------------------------------------
def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=20_000_000)
    p.add_argument("--buckets", type=int, default=32)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--parts", default="stream,merge,read", help="comma-separated: stream, merge, read")
    p.add_argument("--modes", default="cow,dv", help="the merge part's modes: cow, dv")
    p.add_argument("--page-size", default=None, help="write the table with pages of this size (indexeddf.parquet.pageSize)")
    p.add_argument("--work", default=None, help="folder for the tables (default: the system's temp folder)")
    p.add_argument("--out", default=None, help="the results JSON (default benchmarks/results/DATE-HHMM-feed-ROWS.json; -: none)")
    args = p.parse_args()
    import indexeddf

    work = Path(tempfile.mkdtemp(prefix="feed-bench-", dir=args.work))
    started = datetime.now(timezone.utc)
    try:
        table = work / "table"
        t0 = time.perf_counter()
        build(table, args.rows, args.buckets,
              properties={"indexeddf.parquet.pageSize": args.page_size} if args.page_size else None)
        say(f"table: {args.rows:,} rows, {args.buckets} buckets"
            + (f", data pages of {args.page_size}" if args.page_size else "")
            + f", built in {time.perf_counter() - t0:.0f} s")
        spark = indexeddf.local_session("indexeddf-feed-benchmark", driver_memory="4g")
        parts = {"stream": stream_part, "merge": merge_part, "read": read_part}
        for name in args.parts.split(","):
            parts[name](spark, table, work, args)
        spark.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if args.out != "-":
        _write_results(args, started)


def _write_results(args, started: datetime) -> None:
    """What the run printed, as a recorded run (tests/test_benchmark_results.py reads them)."""
    rows = f"{args.rows // 1_000_000}m" if args.rows % 1_000_000 == 0 else f"{args.rows // 1000}k"
    run = f"{started:%Y-%m-%d-%H%M}-feed-{rows}"
    out = Path(args.out) if args.out else ROOT / "benchmarks" / "results" / f"{run}.json"
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT).stdout.strip()
    record = {"run": out.stem, "kind": "benchmarks/feed.py", "date": f"{started:%Y-%m-%d}",
              "command": "python benchmarks/feed.py " + " ".join(sys.argv[1:]), "commit": commit or None,
              "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
              "source": "written by the command on this machine: the lines it printed",
              "printed": PRINTED}
    out.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
