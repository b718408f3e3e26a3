"""Indexed joins: the table as a pre-built build side (``IndexedTable.join`` / ``join_table``).

``t.join(df, on, how)`` returns exactly what Spark's ``df.join(t.to_df(spark), on, how)``
returns (columns, names, types, rows), for ``how`` in inner / left / semi. Strategies:

- ``shuffle``: the probe is repartitioned by Spark's hash of its key columns (cast to
  the table's key types) into the bucket count of the index (or of the table's data
  bucketing); task i probes bucket i's trie and scans bucket i's unindexed files
  (:mod:`.join_probe`). The table is never shuffled.
- ``broadcast``: the probe's distinct keys are collected on the driver, only their
  buckets are read (trie probes plus unindexed files), and Spark joins the probe with
  those rows, broadcast.
- ``spark``: no index or bucketing on the join keys (or key types Spark would coerce
  in ways a hash cannot follow), or a probe large against the table: Spark's own join
  of the probe with ``to_df(bucketed=True)`` (Spark knows the table's bucketing, so a
  join on the index columns shuffles only the probe). With the connector on, that is
  the connector's read of the version, so its rules (a small probe's keys looked up
  through the index) apply to this join too.

``auto`` picks broadcast when the probe is small: Spark's size estimate is at most
``broadcast_threshold_rows`` rows and its distinct non-null keys (collected with a
limit of threshold + 1) are at most that many. It hands the join to Spark (``spark``)
when Spark estimates the probe at more than ``spark_join_ratio`` of the table's rows:
probing that many random keys decodes about every row group in Python, where Spark's
own join reads only the columns it needs in the JVM (docs/benchmarks.md: at 5 % of
the table the shuffle strategy took 2.1x the Parquet join). Shuffle otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from ..errors import InvalidOptionError, SchemaMismatchError
from ..format.snapshot import Snapshot
from ..format.storage import frozen_options
from ..optimizer.planner import covered_ids, join_index
from ..reader.join_probe import TableSide
from ..reader.lookup import ReadContext, deletion_vectors_of, partitions_of
from ..spec.arrays import distinct
from ..spec.column_mapping import table_schema
from ..spec.schema import arrow_schema
from .bucketed import bucketed_scan_reason
from .native import JVM_UNAVAILABLE, reads_through_connector
from .types import spark_schema

DEFAULT_BROADCAST_THRESHOLD_ROWS = 1_000
"""``auto`` broadcasts probes of at most this many rows / distinct keys."""
DEFAULT_SPARK_JOIN_RATIO = 0.01
"""``auto`` uses Spark's own join when the probe is estimated above this fraction of the
table's rows (measured crossover on 20M rows: 0.5 % probed faster, 5 % slower)."""
STRATEGIES = ("auto", "shuffle", "broadcast")
HOWS = {"inner": "inner", "left": "left", "leftouter": "left", "left_outer": "left",
        "semi": "semi", "leftsemi": "semi", "left_semi": "semi"}
"""The join types a table join takes (Spark's spellings) and the kind each one is."""
_INTEGRAL = ("tinyint", "smallint", "int", "bigint")


@dataclass(frozen=True)
class JoinOptions:
    """The options of :meth:`IndexedTable.join` and :meth:`IndexedTable.explain_join`
    (one object, so the two cannot drift; docs/joins.md).

    ``left_on`` / ``right_on``: this table's and the DataFrame's key columns, instead of
    ``on``. ``strategy``: ``"auto"``, ``"shuffle"`` (only the DataFrame is shuffled, into
    the table's buckets) or ``"broadcast"`` (its distinct keys are looked up; only their
    buckets are read). ``version``: the table's version to join (default the newest).
    ``broadcast_threshold_rows`` (default 1,000) bounds ``auto``'s broadcast.
    ``partitions``: tasks of the shuffle strategy (default: the bucket count, at most
    Spark's default parallelism). ``columns``: the table's columns to join (its key
    columns always; default all). ``spark_join_ratio`` (default 0.01): ``auto`` hands the
    join to Spark's own join when Spark estimates the DataFrame at more than this fraction
    of the table's rows (``float('inf')``: never). None for either threshold: its default.
    """

    left_on: object = None
    right_on: object = None
    strategy: str = "auto"
    version: int | None = None
    broadcast_threshold_rows: int | None = None
    partitions: int | None = None
    columns: object = None
    spark_join_ratio: float | None = None

    def __post_init__(self):
        if self.broadcast_threshold_rows is None:
            object.__setattr__(self, "broadcast_threshold_rows", DEFAULT_BROADCAST_THRESHOLD_ROWS)
        if self.spark_join_ratio is None:
            object.__setattr__(self, "spark_join_ratio", DEFAULT_SPARK_JOIN_RATIO)
        if self.strategy not in STRATEGIES:
            raise InvalidOptionError(f"strategy={self.strategy!r}; one of {list(STRATEGIES)}")
        rows, ratio = self.broadcast_threshold_rows, self.spark_join_ratio
        if isinstance(rows, bool) or not isinstance(rows, int) or rows < 0:
            raise InvalidOptionError(f"broadcast_threshold_rows must be an integer >= 0, got {rows!r}")
        if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not ratio > 0:
            raise InvalidOptionError(f"spark_join_ratio must be a number > 0 (float('inf'): never), got {ratio!r}")
        if self.partitions is not None and (isinstance(self.partitions, bool) or not isinstance(self.partitions, int)
                                            or self.partitions < 1):
            raise InvalidOptionError(f"partitions must be an integer >= 1, got {self.partitions!r}")

    @classmethod
    def of(cls, options: dict) -> "JoinOptions":
        """The options given as keywords; an unknown name is an :class:`InvalidOptionError`."""
        names = list(cls.__dataclass_fields__)
        unknown = sorted(set(options) - set(names))
        if unknown:
            raise InvalidOptionError(f"unknown join options {unknown}; the options are {names}")
        return cls(**options)


@dataclass
class JoinPlan:
    """How a join runs, and why (``explain_join`` prints it)."""

    strategy: str  # shuffle | broadcast | spark
    how: str
    using: bool
    table_keys: list[str]
    probe_keys: list[str]
    reasons: list[str] = field(default_factory=list)
    side: TableSide | None = None
    side_text: str = ""
    broadcast_probe: str | None = None
    """Under the ``spark`` strategy: why Spark will broadcast the DataFrame (then the
    table is read unbucketed, as its bucketing would spare no shuffle); None otherwise."""
    connector: bool = False
    """Under the ``spark`` strategy: the table side is the JVM connector's read of the
    version (``to_df`` on a session with the connector), else Spark's Parquet scan."""
    columns: list[str] | None = None
    """The table's columns the join sees (the keys always; None: all)."""
    partitions: int | None = None
    """Tasks of the shuffle strategy (buckets are spread over them; None: one per bucket)."""
    keys: pa.Table | None = None
    """The probe's distinct keys (broadcast), typed and named as the table's key columns."""


# -- planning ------------------------------------------------------------------------------
def key_lists(schema: pa.Schema, probe_cols: list[str], on, left_on, right_on):
    """The table's key columns, the probe's, and whether the key names are shared (``on``:
    the output keeps one copy), from ``on`` or ``left_on``/``right_on``; typed errors for
    keys either side lacks."""
    if on is not None:
        if left_on is not None or right_on is not None:
            raise InvalidOptionError("give on=, or left_on= and right_on=, not both")
        keys = [on] if isinstance(on, str) else list(on)
        table_keys, probe_keys, using = keys, keys, True
    else:
        if left_on is None or right_on is None:
            raise InvalidOptionError("give on= (columns of both sides), or left_on= (the table's) and right_on= (the DataFrame's)")
        table_keys = [left_on] if isinstance(left_on, str) else list(left_on)
        probe_keys = [right_on] if isinstance(right_on, str) else list(right_on)
        using = False
        if len(table_keys) != len(probe_keys):
            raise InvalidOptionError(f"left_on {table_keys} and right_on {probe_keys} differ in length")
    if not table_keys:
        raise InvalidOptionError("a join needs at least one key column")
    if len(set(table_keys)) != len(table_keys) or len(set(probe_keys)) != len(probe_keys):
        raise InvalidOptionError(f"a join key column appears twice: {table_keys} / {probe_keys}")
    missing = [c for c in table_keys if c not in schema.names]
    if missing:
        raise SchemaMismatchError(f"join keys {missing} are not columns of the table; it has {schema.names}", missing)
    missing = [c for c in probe_keys if c not in probe_cols]
    if missing:
        raise SchemaMismatchError(f"join keys {missing} are not columns of the DataFrame; it has {probe_cols}", missing)
    return table_keys, probe_keys, using


def _types_fit(table_type, probe_type) -> bool:
    """Whether a hash of the probe key cast to the table's type finds every match Spark's
    join finds: equal types, or integers of different widths (Spark widens them)."""
    return table_type == probe_type or (table_type.simpleString() in _INTEGRAL and probe_type.simpleString() in _INTEGRAL)


def table_side(snapshot: Snapshot, table_keys: list[str]) -> tuple[TableSide | None, str, list[str]]:
    """The pre-built side for a join on ``table_keys``: an ACTIVE, fresh index whose
    columns are all join keys (the primary one first), else the data bucketing when the
    table's index columns are all join keys; None when neither."""
    meta = snapshot.metadata
    schema = table_schema(meta)
    live = snapshot.files
    entry, why_not = join_index(snapshot, table_keys)
    if entry is not None:
        covered = covered_ids(entry)
        index_files: dict[int, list] = {}
        for f in entry.files:
            index_files.setdefault(f.bucket, []).append(f)
        uncovered = sorted((a for a in live.values() if a.fileId not in covered), key=lambda a: a.path)
        bucketed = tuple(entry.columns) == tuple(meta.indexColumns) and entry.numBuckets == meta.numBuckets
        scan: dict[int, list] = {}
        for a in uncovered:  # -1: rows of any bucket (see TableSide.scan_files)
            scan.setdefault(a.bucket if bucketed and a.bucket is not None else -1, []).append(a)
        live_ids = np.array(sorted(a.fileId for a in live.values() if a.fileId in covered), dtype=np.int64)
        fetched = [a for a in live.values() if a.fileId in covered]
        ctx = ReadContext(snapshot.storage.url, frozen_options(snapshot.storage.storage_options), meta.id,
                          schema, tuple(entry.columns), {a.fileId: a.path for a in fetched}, live_ids,
                          snapshot.version, deletion_vectors_of(fetched), partitions_of(fetched))
        side = TableSide(ctx, tuple(entry.columns), entry.numBuckets,
                         {b: tuple(fs) for b, fs in index_files.items()}, {b: tuple(fs) for b, fs in scan.items()})
        text = (f"index {entry.name!r} on {list(entry.columns)}, {entry.numBuckets} buckets; "
                f"{len(uncovered)} unindexed file(s) scanned" + (" in their bucket's task" if bucketed else " by every task"))
        return side, text, why_not
    if set(meta.indexColumns) <= set(table_keys):
        scan = {}
        for a in sorted(live.values(), key=lambda a: a.path):
            scan.setdefault(-1 if a.bucket is None else a.bucket, []).append(a)
        ctx = ReadContext(snapshot.storage.url, frozen_options(snapshot.storage.storage_options), meta.id,
                          schema, tuple(meta.indexColumns), {}, np.empty(0, np.int64))
        side = TableSide(ctx, tuple(meta.indexColumns), meta.numBuckets, {}, {b: tuple(fs) for b, fs in scan.items()})
        text = (f"no index; the data is bucketed by {list(meta.indexColumns)} into {meta.numBuckets} buckets: "
                "task i scans data bucket i")
        return side, text, why_not
    why_not.append(f"the table's data is bucketed by {list(meta.indexColumns)}, not all join keys")
    return None, "", why_not


def plan_join(snapshot: Snapshot, probe_df, on=None, how: str = "inner", options: JoinOptions | None = None) -> JoinPlan:
    """Choose the strategy of ``t.join(probe_df, on, how, **options)`` at ``snapshot``.

    May run one small Spark job: collecting the probe's distinct keys (with a limit
    under ``auto``) when a broadcast is considered.
    """
    o = options or JoinOptions()
    strategy, columns, partitions = o.strategy, o.columns, o.partitions
    broadcast_threshold_rows, spark_join_ratio = o.broadcast_threshold_rows, o.spark_join_ratio
    how_key = HOWS.get(str(how).lower())
    if how_key is None:
        raise InvalidOptionError(f"how={how!r}: indexed joins support inner, left and semi")
    schema = arrow_schema(snapshot.metadata.schema_)
    table_keys, probe_keys, using = key_lists(schema, list(probe_df.columns), on, o.left_on, o.right_on)
    plan = JoinPlan("spark", how_key, using, table_keys, probe_keys)
    if columns is not None:
        columns = [columns] if isinstance(columns, str) else list(columns)
        unknown = [c for c in columns if c not in schema.names]
        if unknown:
            raise SchemaMismatchError(f"columns {unknown} are not columns of the table; it has {schema.names}", unknown)
        plan.columns = [c for c in schema.names if c in columns or c in table_keys]
    tfields = {f.name: f for f in spark_schema(snapshot.metadata.schema_).fields}
    ptypes = {f.name: f.dataType for f in probe_df.schema.fields}
    bad = [(t, p) for t, p in zip(table_keys, probe_keys) if not _types_fit(tfields[t].dataType, ptypes[p])]
    if bad:
        desc = ", ".join(f"{p} is {ptypes[p].simpleString()} where the table's {t} is {tfields[t].dataType.simpleString()}" for t, p in bad)
        plan.reasons.append(f"key types differ ({desc}); Spark's join coerces them, which a key hash cannot follow")
        side = None
    else:
        side, plan.side_text, why_not = table_side(snapshot, table_keys)
        plan.reasons += [f"why not: {r}" for r in why_not]
    if side is None:
        if strategy != "auto":
            raise InvalidOptionError(f"strategy={strategy!r} needs an index or bucketing on the join keys: "
                                     + "; ".join(plan.reasons) + ". Use strategy='auto' (Spark's own join)")
        plan.reasons.insert(0, "Spark's own join of the DataFrame with to_df(): no pre-built side")
        plan.broadcast_probe = _spark_broadcasts(probe_df, *estimate_rows(probe_df))
        plan.connector = reads_through_connector(probe_df.sparkSession, snapshot)
        return plan
    plan.side = side
    plan.partitions = min(side.num_buckets, partitions or default_partitions(probe_df, side.num_buckets))
    if strategy == "shuffle":
        plan.strategy = "shuffle"
        plan.reasons.insert(0, "shuffle: requested")
        return plan
    limit = None
    if strategy == "auto":
        rows, size = estimate_rows(probe_df)
        table_rows = snapshot.num_records()
        if rows is not None and rows > spark_join_ratio * table_rows:
            plan.strategy, plan.side = "spark", None
            plan.broadcast_probe = _spark_broadcasts(probe_df, rows, size)
            plan.connector = reads_through_connector(probe_df.sparkSession, snapshot)
            plan.reasons.insert(0, f"spark: Spark estimates the DataFrame at {rows:,} rows ({size:,} bytes), more than "
                                   f"spark_join_ratio={spark_join_ratio:g} of the table's {table_rows:,} rows; probing "
                                   "that many keys decodes about every row group in Python, so Spark's own join "
                                   "of to_df() (only the needed columns, in the JVM) is cheaper")
            return plan
        if rows is not None and rows > broadcast_threshold_rows:
            plan.strategy = "shuffle"
            plan.reasons.insert(0, f"shuffle: Spark estimates the DataFrame at {rows:,} rows ({size:,} bytes), "
                                   f"above broadcast_threshold_rows={broadcast_threshold_rows:,}")
            return plan
        limit = broadcast_threshold_rows + 1
    plan.keys = collect_keys(probe_df, table_keys, probe_keys, tfields, schema, limit)
    if limit is not None and plan.keys.num_rows >= limit:
        plan.strategy, plan.keys = "shuffle", None
        plan.reasons.insert(0, f"shuffle: the DataFrame has more than broadcast_threshold_rows={broadcast_threshold_rows:,} distinct keys")
        return plan
    plan.strategy = "broadcast"
    plan.reasons.insert(0, "broadcast: requested" if strategy == "broadcast" else
                        f"broadcast: {plan.keys.num_rows:,} distinct keys, at most broadcast_threshold_rows={broadcast_threshold_rows:,}")
    return plan


def estimate_rows(df) -> tuple[int | None, int | None]:
    """Spark's estimate of a DataFrame's rows (from its optimized plan's statistics:
    the row count when known, else bytes over the row's default size), and bytes."""
    try:
        stats = df._jdf.queryExecution().optimizedPlan().stats()
        size = int(str(stats.sizeInBytes()))
        count = stats.rowCount()
        if size >= 1 << 62:
            return None, None  # unknown (Spark's spark.sql.defaultSizeInBytes)
        if count.isDefined():
            return int(str(count.get())), size
        width = max(1, int(df._jdf.schema().defaultSize()))
        return size // width, size
    except JVM_UNAVAILABLE:  # no JVM plan (Spark Connect): decide by the keys alone
        return None, None


def _spark_broadcasts(df, rows: int | None, size: int | None) -> str | None:
    """Why Spark's own join will broadcast ``df`` (its estimate is under
    ``spark.sql.autoBroadcastJoinThreshold``), or None."""
    try:
        limit = int(df.sparkSession.conf.get("spark.sql.autoBroadcastJoinThreshold").rstrip("b"))
    except ValueError:  # a "10MB"-style or unparsable setting: assume no broadcast
        return None
    if size is None or limit < 0 or size > limit:
        return None
    return (f"Spark estimates the DataFrame at {size:,} bytes, under spark.sql.autoBroadcastJoinThreshold="
            f"{limit:,}: it broadcasts the DataFrame, so the table's bucketing would spare no shuffle")


def cast_key(df_col, table_type, probe_type):
    """A probe key column in the table key's Spark type (NULL where it does not fit)."""
    return df_col if table_type == probe_type else df_col.try_cast(table_type)


def collect_keys(probe_df, table_keys, probe_keys, tfields, schema: pa.Schema, limit: int | None) -> pa.Table:
    """The probe's distinct non-null keys, cast to (and named as) the table's key columns."""
    from pyspark.sql import functions as F

    ptypes = {f.name: f.dataType for f in probe_df.schema.fields}
    names = [f"_k{j}" for j in range(len(table_keys))]
    cols = [cast_key(F.col(p), tfields[t].dataType, ptypes[p]).alias(n) for t, p, n in zip(table_keys, probe_keys, names)]
    df = probe_df.select(*cols)
    for n in names:
        df = df.where(F.col(n).isNotNull())
    df = df.distinct()
    if limit is not None:
        df = df.limit(limit)
    got = df.toArrow()
    arrays = [got.column(n).cast(schema.field(t).type) for n, t in zip(names, table_keys)]
    return pa.Table.from_arrays(arrays, names=table_keys)


def default_partitions(probe_df, num_buckets: int) -> int:
    """Tasks of a shuffle join: the bucket count, or fewer (the cluster's default
    parallelism) when buckets outnumber cores. A Python task costs tens of ms, and with
    one task per core the same buckets meet the same warm worker caches more often
    (measured: 2 tasks on 2 cores ~0.4 s where 4 tasks took 0.7-1.5 s, warm)."""
    try:
        par = probe_df.sparkSession.sparkContext.defaultParallelism
    except JVM_UNAVAILABLE:  # Spark Connect: one task per bucket
        return num_buckets
    return max(1, min(num_buckets, par))


def key_buckets(keys: pa.Table, side: TableSide) -> np.ndarray:
    """The table bucket of each key row (Spark's ``pmod(hash(keys), num_buckets)``)."""
    from ..spec.bucketing import bucket_ids

    return bucket_ids([keys.column(c) for c in side.hash_columns], side.num_buckets)


# -- explain -------------------------------------------------------------------------------
def describe(plan: JoinPlan, snapshot: Snapshot) -> str:
    """``explain_join``'s text."""
    keys = (f"on {plan.table_keys}" if plan.using else f"table {plan.table_keys} = DataFrame {plan.probe_keys}")
    lines = [
        f"join of {snapshot.storage.url} version {snapshot.version} ({snapshot.num_records()} rows, "
        f"{snapshot.metadata.numBuckets} buckets) with a DataFrame {keys}, how={plan.how}",
        f"strategy: {plan.strategy}",
    ]
    lines += [f"  {r}" for r in plan.reasons]
    if plan.strategy == "spark":
        meta = snapshot.metadata
        why = plan.broadcast_probe or bucketed_scan_reason(snapshot, connector=plan.connector)
        read = ("the connector's read of the version (Spark's Parquet scan of its files)" if plan.connector
                else "Spark's Parquet scan of the version's files")
        lines.append(f"  table side: {read}, " + (
            f"bucketed: Spark knows the table's {meta.numBuckets} buckets on {list(meta.indexColumns)}, so a join "
            "on those columns shuffles only the DataFrame" if why is None else f"not bucketed ({why})"))
    if plan.side is not None:
        lines.append(f"  table side: {plan.side_text}")
        if plan.strategy == "shuffle":
            k = plan.partitions or plan.side.num_buckets
            which = "task i joins bucket i" if k >= plan.side.num_buckets else f"task j joins the buckets b with b % {k} = j"
            lines.append(f"  the DataFrame is repartitioned into {k} partitions by Spark's hash of its keys for "
                         f"{list(plan.side.hash_columns)}; {which}; the table is not shuffled")
        if plan.strategy == "broadcast" and plan.keys is not None:
            touched = len(distinct(key_buckets(plan.keys, plan.side))) if plan.keys.num_rows else 0
            lines.append(f"  buckets read: {touched} of {plan.side.num_buckets}")
    return "\n".join(lines)


