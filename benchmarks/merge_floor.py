"""The floor of a pipeline-sized Spark SQL MERGE: what its unavoidable parts cost on their own.

    python benchmarks/merge_floor.py [--rows 20000000] [--buckets 32] [--source 2000000]
                                     [--rounds 2] [--work DIR] [--out JSON]

The table and source are ``changes.py``'s (an upsert: half the source's keys in the table,
half new). In one warm Spark session (``local[2]``), each part runs ``--rounds`` times and
the last round's CPU seconds of the process tree are printed (benchmarks/proctree.py):

- ``source to buckets``: Spark reads the source and shuffles it by the table's bucketing
  (``repartition(buckets, k)``; a no-op sink): every design that writes the source's rows
  into the table's buckets from Spark moves them so;
- ``source to buckets, to Python``: the same rows then handed to Python tasks as Arrow, as
  many tasks as the MERGE's writers (twice the default parallelism);
- ``source to Python, not shuffled``: the source's rows handed to Python tasks where Spark
  reads them (no shuffle): the least any Python writer of the rows pays to receive them;
- ``Spark's own bucketed write of the source``: Spark shuffles the source by bucket, sorts
  each bucket by key and writes it as zstd Parquet itself, no Python: the floor of a writer
  that would run in the JVM;
- ``target keys``: Spark's scan of the table's key with each row's file id and ordinal;
- ``join``: that scan joined with the source (a no-op sink);
- ``Python write``: the project's writer writing the source's rows as a new table of the
  same bucket count (bucket, sort, data files with statistics and bloom filters, index);
- ``Python copy of every file``: each of the table's data files read and written again by the
  writer's ``write_file`` (statistics, bloom filters), what copy on write does to every file
  an upsert touches (here: all of them; the index entries it carries are not counted);
- the anchor, delta-rs's MERGE of the same source into a copy of the table with deletion
  vectors on (delta-rs rewrites the files either way), and the Spark SQL MERGE itself on
  another copy, with deletion vectors and copy on write.

It prints the floor of the design (the source moved to the buckets in Python, then written)
against the anchor's CPU seconds, and the ratio to delta-rs the floor allows.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from proctree import cpu_between, tree_cpu  # noqa: E402

SQL = ("MERGE INTO indexeddf.`{path}` AS t USING merge_floor_source AS s ON t.k = s.k "
       "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *")


def _cpu_of(work) -> tuple[float, float]:
    """Wall and CPU seconds of the process tree while ``work()`` runs."""
    before, t0 = tree_cpu(), time.perf_counter()
    work()
    return time.perf_counter() - t0, cpu_between(before, tree_cpu())


def _copy(table: Path, to: Path, vectors: bool) -> None:
    from indexeddf import IndexedTable

    shutil.rmtree(to, ignore_errors=True)
    shutil.copytree(table, to)
    if vectors:
        IndexedTable.for_path(str(to)).set_properties({"delta.enableDeletionVectors": "true"})


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=20_000_000)
    p.add_argument("--buckets", type=int, default=32)
    p.add_argument("--source", type=int, default=2_000_000)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--work", default=None)
    p.add_argument("--out", default=None, help="write what it printed, as JSON, here")
    args = p.parse_args()

    import pyarrow as pa
    import pyarrow.parquet as pq
    from changes import build, source

    import indexeddf
    from indexeddf import IndexedTable

    work = Path(args.work or tempfile.mkdtemp(prefix="indexeddf-merge-floor-"))
    table, src = work / f"table-{args.rows}-{args.buckets}", work / f"source-{args.source}.parquet"
    if not table.exists():
        build(table, args.rows, args.buckets)
    pq.write_table(source(args.rows, args.source), src)
    rows = pq.read_table(src)
    spark = indexeddf.local_session("merge-floor", driver_memory="4g")
    indexeddf.register(spark)
    source_df = spark.read.parquet(str(src))
    source_df.createOrReplaceTempView("merge_floor_source")
    target = spark.read.format("indexeddf").load(str(table)).select(
        "k", "_metadata.row_index", "_metadata.indexeddf_file_id")
    tasks = 2 * spark.sparkContext.defaultParallelism

    def count_rows(batches):
        n = 0
        for b in batches:
            n += b.num_rows
        yield pa.RecordBatch.from_pydict({"n": [n]})

    def write_python():
        shutil.rmtree(work / "written", ignore_errors=True)
        IndexedTable.create(str(work / "written"), rows, ["k"], num_buckets=args.buckets)

    def delta_rs():
        import deltalake

        _copy(table, work / "delta-rs", True)
        return _cpu_of(lambda: deltalake.DeltaTable(str(work / "delta-rs")).merge(
            rows, "t.k = s.k", source_alias="s", target_alias="t").when_matched_update_all()
            .when_not_matched_insert_all().execute())

    def merge(vectors: bool):
        _copy(table, work / "merged", vectors)
        return _cpu_of(lambda: spark.sql(SQL.format(path=work / "merged")).collect())

    def copy_python():
        from indexeddf.format.storage import TableStorage
        from indexeddf.writer.files import write_file

        out = TableStorage(str(work / "copied"))
        for a in IndexedTable.for_path(str(table)).snapshot.live_files():
            f = pq.ParquetFile(table / a.path)
            write_file(out, (a.path, a.fileId), a.bucket, f.read(), f.metadata.row_group(0).num_rows, ["k"], True)

    noop = {"source to buckets": lambda: source_df.repartition(args.buckets, "k").write.format("noop")
            .mode("overwrite").save(),
            "source to buckets, to Python": lambda: source_df.repartition(args.buckets, "k").coalesce(tasks)
            .mapInArrow(count_rows, "n long").collect(),
            "source to Python, not shuffled": lambda: source_df.mapInArrow(count_rows, "n long").collect(),
            "Spark's own bucketed write of the source": lambda: source_df.repartition(args.buckets, "k")
            .sortWithinPartitions("k").write.mode("overwrite").option("compression", "zstd")
            .parquet(str(work / "spark-written")),
            "target keys": lambda: target.where("row_index < 0").count(),
            "join": lambda: target.join(source_df, "k", "right").write.format("noop").mode("overwrite").save(),
            "Python write": write_python,
            "Python copy of every file": copy_python}
    printed = [f"table: {args.rows:,} rows, {args.buckets} buckets; source: {args.source:,} rows; "
               f"{args.rounds} rounds, the last one's figures"]
    figures = {}
    from indexeddf.spark.session import arrow_batches_by_rows

    for name, work_fn in noop.items():
        for _ in range(args.rounds):
            # Arrow batches to Python bounded by rows only, as the connector's writes send them.
            with arrow_batches_by_rows(spark):
                figures[name] = _cpu_of(work_fn)
    for name, run in (("delta-rs MERGE, deletion vectors (anchor)", delta_rs),
                      ("Spark SQL MERGE INTO, deletion vectors", lambda: merge(True)),
                      ("Spark SQL MERGE INTO, copy on write", lambda: merge(False))):
        for _ in range(args.rounds):
            figures[name] = run()
    printed.append(f"{'part':45} {'wall s':>8} {'CPU s':>8}")
    printed += [f"{name:45} {wall:8.2f} {cpu:8.2f}" for name, (wall, cpu) in figures.items()]
    anchor = figures["delta-rs MERGE, deletion vectors (anchor)"][1]
    floor = figures["source to buckets, to Python"][1] + figures["Python write"][1]
    merged = figures["Spark SQL MERGE INTO, deletion vectors"][1]
    printed.append(f"floor (source to buckets, to Python + Python write): {floor:.2f} CPU s; "
                   f"at most {anchor / floor:.2f}x delta-rs's CPU; the MERGE: {anchor / merged:.2f}x")
    copy = figures["source to buckets, to Python"][1] + figures["Python copy of every file"][1]
    printed.append(f"copy on write's floor (source to buckets, to Python + Python copy of every file): {copy:.2f} CPU s; "
                   f"at most {anchor / copy:.2f}x delta-rs's CPU")
    jvm = figures["Spark's own bucketed write of the source"][1]
    printed.append(f"a writer in the JVM (Spark's own bucketed write of the source, no Python): {jvm:.2f} CPU s; "
                   f"at most {anchor / jvm:.2f}x delta-rs's CPU")
    for line in printed:
        print(line, flush=True)
    spark.stop()
    if args.out:
        Path(args.out).write_text(json.dumps({"command": " ".join(sys.argv), "printed": printed,
                                              "figures": figures}, indent=1) + "\n")


if __name__ == "__main__":
    main()
