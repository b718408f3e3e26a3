"""Point lookups of new keys at two table sizes: does their cost grow with the table?

A lookup of a few keys reads, per index file of a touched bucket, the blocks (index row
groups of 16,384 entries) whose hash range holds the keys' hashes, then the data row
group holding the row. This benchmark times a lookup of one new key (a user id drawn at
random, never looked up before in the process; about 2 % of them are in no row) through ``IndexedTable.lookup`` and through the JVM connector
(``spark.read.format("indexeddf")...where(user_id = k).collect()``), each at every size
given, in two ways a process can be warm:

- ``blocks``: the process made a few point lookups before (footers read, code loaded);
  each new key reads its own index blocks and data row group (the blocks and row groups
  a timed call read are dropped after it, untimed, so the next call finds none of them);
- ``whole``: the process first looked up 2,000 keys at once, which reads every bucket's
  index files whole and keeps them (what a process held before index blocks, once each
  bucket had been looked up twice); each new key then reads its data row group only;
- ``again``: keys already looked up: the 20 keys of the warm-up, again and again in turn
  (whatever the process kept of them stays kept).

Each (engine, way, size) runs in a process of its own, so its peak RSS (``VmHWM``: of the
Python process, or of the Spark driver JVM) is its own. Times are per lookup: the median
wall time and the mean CPU time (of the Python process, or of the JVM), over ``--keys``
new keys. The connector's cases also run on an empty table of the same schema (``rows`` 0:
the same point-lookup query, in the same kind of process), the **floor** a query through
the connector costs whatever the data; the larger sizes are printed as ratios of it too.
``--code DIR`` runs another checkout's ``indexeddf`` (its jar built in it) for a
before/after comparison in one run. ``--repeats N`` runs every case N times, round after
round, so that a slow spell of the machine falls on the floor and the sizes alike; the ratios
are then given per round and as their median over the rounds (between two processes of one
commit the floor's ratio moves by a fifth on this machine). Results JSON: ``--out``.

    python benchmarks/lookup_blocks.py --rows 2000000 20000000 --out benchmarks/results/<stamp>-lookup-blocks.json
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

from harness import add_machine_argument

HERE = Path(__file__).resolve().parent


def vm_peak_mib(pid: int | str = "self") -> float:
    """Peak resident memory (``VmHWM``) of ``pid`` in MiB."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


def python_child(rows: int, n_keys: int, way: str) -> dict:
    """New-key lookups through ``IndexedTable.lookup`` in this process."""
    import datasets

    from indexeddf import IndexedTable
    from indexeddf.reader.cache import cache, configure

    configure(4 << 30)  # the bound of the lookup scenarios: nothing evicted at these sizes
    path = datasets.events(rows)
    t = IndexedTable.for_path(path)
    warm(lambda ks: t.lookup(ks), path, way)
    timed = ("segment-group", "rowgroup")
    # Only index state stays warm: the data row groups the warm-up read would answer later
    # keys of the same row groups from memory (the 2,000 keys touch most of them).
    again = way == "again"
    if not again:
        cache().discard([x for x in cache().keys() if x[0] == "rowgroup"])
    walls, cpus, found = [], [], 0
    for k in timed_keys(path, n_keys, way):
        before = set(cache().keys())
        c0, w0 = time.process_time(), time.perf_counter()
        got = t.lookup([k])
        walls.append(time.perf_counter() - w0)
        cpus.append(time.process_time() - c0)
        found += got.num_rows
        if not again:
            cache().discard([x for x in cache().keys() if x not in before and x[0] in timed])
    return summary(walls, cpus, vm_peak_mib(), rows_found=found, cache_bytes=cache().stats.bytes)


def connector_child(rows: int, n_keys: int, way: str) -> dict:
    """New-key lookups through the JVM connector (driver-local lookups) in this process's Spark."""
    import datasets
    from proctree import cpu_and_rss, tree

    import indexeddf

    path = datasets.events(rows) if rows else datasets.events_empty()  # 0: the floor
    spark = indexeddf.local_session("lookup-blocks", conf={"spark.default.parallelism": "2"})
    jvm = next(p for p in tree(os.getpid())[1:] if open(f"/proc/{p}/comm").read().strip() == "java")
    df = spark.read.format("indexeddf").load(path)

    def query(keys):
        return df.where(f"user_id IN ({', '.join(map(str, keys))})").collect()

    warm(query, path, way)
    clear = _segment_cache_clear(spark) if way == "blocks" else None
    walls, cpus, found = [], [], 0
    for k in timed_keys(path, n_keys, way):
        c0, w0 = cpu_and_rss(jvm)[0], time.perf_counter()
        got = df.where(f"user_id = {k}").collect()
        walls.append(time.perf_counter() - w0)
        cpus.append(cpu_and_rss(jvm)[0] - c0)
        found += len(got)
        if clear is not None:
            clear()  # untimed: the next key reads its own blocks
    out = summary(walls, cpus, vm_peak_mib(jvm), rows_found=found)
    spark.stop()
    return out


def _segment_cache_clear(spark):
    """A call that empties the connector's index segment cache, or None when the connector
    has no such call (a checkout from before index blocks, which caches whole files only)."""
    jvm = spark._jvm
    loader = jvm.org.apache.spark.util.Utils.getContextOrSparkClassLoader()
    klass = jvm.java.lang.Class.forName("io.indexeddf.spark.Diagnostics", True, loader)
    try:
        method = klass.getMethod("clearSegmentCache", spark.sparkContext._gateway.new_array(jvm.java.lang.Class, 0))
    except Exception:  # py4j wraps NoSuchMethodException
        return None
    return lambda: method.invoke(None, spark.sparkContext._gateway.new_array(jvm.java.lang.Object, 0))


WARM_KEYS = 20
"""Keys the warm-up looks up one at a time (seed 98); ``again`` times them again."""


def timed_keys(path: str, n_keys: int, way: str) -> list[int]:
    """The ``n_keys`` keys a case times: new keys (seed 5), or for ``again`` the warm-up's in turn."""
    import datasets

    if way == "again":
        warmed = datasets.some_keys(path, WARM_KEYS, seed=98)
        return [warmed[i % len(warmed)] for i in range(n_keys)]
    return datasets.some_keys(path, n_keys, seed=5)


def warm(lookup, path: str, way: str) -> None:
    """Make the process warm ``way`` (see the module's docstring)."""
    import datasets

    if way == "whole":
        lookup(datasets.some_keys(path, 2_000, seed=99))  # every bucket's index files, read whole
    for k in datasets.some_keys(path, WARM_KEYS, seed=98):
        lookup([k])


def summary(walls: list[float], cpus: list[float], peak_mib: float, **extra) -> dict:
    """Per-lookup figures in milliseconds, the peak RSS in MiB."""
    return {"lookups": len(walls), "median_ms": round(1000 * statistics.median(walls), 2),
            "p90_ms": round(1000 * sorted(walls)[int(0.9 * len(walls))], 2),
            "cpu_ms_mean": round(1000 * statistics.fmean(cpus), 2), "peak_rss_mib": round(peak_mib), **extra}


def run_child(code: str | None, engine: str, rows: int, n_keys: int, way: str) -> dict:
    """One (engine, way, size) in a process of its own, with ``code``'s indexeddf."""
    env = dict(os.environ)
    if code:
        env["PYTHONPATH"] = os.pathsep.join([code, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    cmd = [sys.executable, __file__, "--child", engine, "--rows", str(rows), "--keys", str(n_keys), "--way", way]
    done = subprocess.run(cmd, env=env, cwd=HERE, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{engine} {way} {rows}: {done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def commit_of(code: str | None) -> str:
    """The commit of ``code`` (a git checkout), or of this one."""
    where = code or str(HERE.parent)
    try:
        return subprocess.run(["git", "-C", where, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (subprocess.CalledProcessError, FileNotFoundError):
        return Path(where, "COMMIT").read_text().strip() if Path(where, "COMMIT").exists() else "unknown"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, nargs="+", default=[2_000_000, 20_000_000])
    ap.add_argument("--keys", type=int, default=200, help="new keys looked up, one at a time")
    ap.add_argument("--connector-keys", type=int, default=100)
    ap.add_argument("--engines", nargs="+", default=["python", "connector"])
    ap.add_argument("--ways", nargs="+", default=["blocks", "whole"])
    ap.add_argument("--code", action="append", default=[], help="another checkout to run as well (label=DIR)")
    ap.add_argument("--repeats", type=int, default=1,
                    help="rounds of every case, run one after another (floor, sizes, other code) so that a slow "
                         "spell of the machine falls on all of them; the ratios are given per round and as their median")
    ap.add_argument("--out")
    add_machine_argument(ap)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--way", default="blocks", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        run = python_child if args.child == "python" else connector_child
        print(json.dumps(run(args.rows[0], args.keys, args.way)))
        return
    codes = [("this", None)] + [tuple(c.split("=", 1)) for c in args.code]
    printed: list[str] = []

    def say(line: str) -> None:
        print(line, flush=True)
        printed.append(line)

    results = []
    for round_ in range(args.repeats):
        for label, code in codes:
            for engine in args.engines:
                for way in args.ways:
                    floor = [0] if engine == "connector" else []  # the empty table, same query
                    for rows in floor + args.rows:
                        n = args.keys if engine == "python" else args.connector_keys
                        r = {"code": label, "commit": commit_of(code), "engine": engine, "way": way, "rows": rows,
                             **({"round": round_} if args.repeats > 1 else {}), **run_child(code, engine, rows, n, way)}
                        say(json.dumps(r))
                        say(f"{label:>6} {engine:>9} {way:>6}: {rows:,} rows{_round(r)}: median {r['median_ms']} ms, "
                            f"p90 {r['p90_ms']} ms, CPU {r['cpu_ms_mean']} ms a lookup, peak RSS {r['peak_rss_mib']} MiB")
                        results.append(r)
    growth = growth_ratios(results, args.rows)
    for g in growth:
        say(f"{g['code']:>6} {g['engine']:>9} {g['way']:>6}{_round(g)}: median {g['median_ratio']}x, CPU "
            f"{g['cpu_ratio']}x, peak RSS {g['rss_ratio']}x from {min(args.rows):,} to {max(args.rows):,} rows")
    floors = floor_ratios(results)
    for f in floors:
        say(f"{f['code']:>6} {f['engine']:>9} {f['way']:>6}{_round(f)}: at {f['rows']:,} rows median "
            f"{f['median_ratio']}x, CPU {f['cpu_ratio']}x, peak RSS {f['rss_ratio']}x the empty table's")
    rounds = over_rounds(growth, ("code", "engine", "way")) + over_rounds(floors, ("code", "engine", "way", "rows"))
    for r in rounds:
        what = f"at {r['rows']:,} rows over the empty table's" if "rows" in r else \
            f"from {min(args.rows):,} to {max(args.rows):,} rows"
        say(f"{r['code']:>6} {r['engine']:>9} {r['way']:>6}: {r['rounds']} rounds, median {what}: "
            f"{r['median_ratio']}x (rounds {r['min_ratio']}x..{r['max_ratio']}x)")
    if args.out:
        out = Path(args.out)
        out.write_text(json.dumps({
            "run": out.stem, "kind": "benchmarks/lookup_blocks.py", "date": time.strftime("%Y-%m-%d", time.gmtime()),
            "command": "python benchmarks/lookup_blocks.py " + shlex.join(argv if argv is not None else sys.argv[1:]),
            "commit": commit_of(None), "machine": args.machine,
            "source": "benchmarks/lookup_blocks.py", "printed": printed, "lookups": results, "growth": growth,
            "floor": floors, "over_rounds": rounds},
            indent=1) + "\n")


def floor_ratios(results: list[dict]) -> list[dict]:
    """Each connector case's figures over the same case on the empty table (``rows`` 0)."""
    out = []
    for r in results:
        floor = next((f for f in results if f["rows"] == 0 and all(f.get(k) == r.get(k) for k in ("code", "engine", "way", "round"))),
                     None)
        if floor is not None and r["rows"]:
            out.append({k: r[k] for k in ("code", "commit", "engine", "way", "rows", "round") if k in r} | {
                "median_ratio": round(r["median_ms"] / floor["median_ms"], 2),
                "cpu_ratio": round(r["cpu_ms_mean"] / floor["cpu_ms_mean"], 2),
                "rss_ratio": round(r["peak_rss_mib"] / floor["peak_rss_mib"], 2)})
    return out


def growth_ratios(results: list[dict], sizes: list[int]) -> list[dict]:
    """Largest size's figures over the smallest's, per (code, engine, way)."""
    out = []
    small, large = min(sizes), max(sizes)
    for r in results:
        if r["rows"] != small:
            continue
        big = next((b for b in results if b["rows"] == large and all(b.get(k) == r.get(k) for k in ("code", "engine", "way", "round"))),
                   None)
        if big is not None and big is not r:
            out.append({k: r[k] for k in ("code", "commit", "engine", "way", "round") if k in r} | {
                "median_ratio": round(big["median_ms"] / r["median_ms"], 2),
                "cpu_ratio": round(big["cpu_ms_mean"] / r["cpu_ms_mean"], 2),
                "rss_ratio": round(big["peak_rss_mib"] / r["peak_rss_mib"], 2)})
    return out


def _round(r: dict) -> str:
    """`` (round i)`` for a figure of one of several rounds."""
    return f" (round {r['round'] + 1})" if "round" in r else ""


def over_rounds(ratios: list[dict], keys: tuple[str, ...]) -> list[dict]:
    """The median ratio of each case over its rounds, with the rounds' least and greatest
    (nothing when there was one round)."""
    groups: dict[tuple, list[dict]] = {}
    for r in ratios:
        if "round" in r:
            groups.setdefault(tuple(r[k] for k in keys), []).append(r)
    return [dict(zip(keys, key)) | {"rounds": len(rs), "median_ratio": round(statistics.median(x["median_ratio"] for x in rs), 2),
                                    "min_ratio": min(x["median_ratio"] for x in rs),
                                    "max_ratio": max(x["median_ratio"] for x in rs)}
            for key, rs in groups.items()]


if __name__ == "__main__":
    main()
