"""A/B of a point lookup's data row group read in one driver JVM: the page path
(``exec/DataPages.java``) on and off (JVM system property ``indexeddf.dataPages.off``),
alternating per new key, with the connector's own wall-time counters of the two reads
(``Diagnostics.dataGroupReads()``) and each lookup's wall time (the segment cache cleared before every lookup). It records no
run; docs/indexes.md quotes what it printed.

    PYTHONPATH=.:tests python benchmarks/lookup_pages_ab.py 20000000 200
"""
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
import datasets  # noqa: E402
from connector_helpers import jvm_diagnostic  # noqa: E402

import indexeddf  # noqa: E402

path = datasets.events(int(sys.argv[1]))
n = int(sys.argv[2])
spark = indexeddf.local_session("ab", conf={"spark.default.parallelism": "2"})
df = spark.read.format("indexeddf").load(path)
jvm = spark._jvm
def stats(): return [int(x) for x in jvm_diagnostic(spark, "dataGroupReads")]
def clear(): jvm_diagnostic(spark, "clearSegmentCache")
for k in datasets.some_keys(path, 40, seed=98):
    for off in ("true", "false"):
        jvm.java.lang.System.setProperty("indexeddf.dataPages.off", off)
        df.where(f"user_id = {k}").collect()
walls = {"true": [], "false": []}
s0 = stats()
found = {"true": 0, "false": 0}
keys = datasets.some_keys(path, n, seed=5)
for i, k in enumerate(keys):
    order = ("true", "false") if i % 2 else ("false", "true")
    for off in order:
        jvm.java.lang.System.setProperty("indexeddf.dataPages.off", off)
        clear()
        w0 = time.perf_counter()
        got = df.where(f"user_id = {k}").collect()
        walls[off].append(time.perf_counter() - w0)
        found[off] += len(got)
s1 = stats()
d = [b - a for a, b in zip(s0, s1)]
print("stats delta", d)
print(f"page reads {d[0]} mean {d[2] / max(1, d[0]) / 1e3:.1f} us; spark reads {d[3]} mean {d[4] / max(1, d[3]) / 1e3:.1f} us; fallbacks {d[1]}")
for off in ("false", "true"):
    label = "off" if off == "true" else "on "
    print(f"pages {label}: median {1000 * statistics.median(walls[off]):.2f} ms, "
          f"mean {1000 * statistics.fmean(walls[off]):.2f} ms, rows {found[off]}")
spark.stop()
