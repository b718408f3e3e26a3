"""Running a planned indexed join (:mod:`.join`): Spark's join, broadcast, shuffle, and
``join_table``'s bucket-by-bucket join. The tasks' kernel is :mod:`.join_probe`."""

from __future__ import annotations

import functools

import numpy as np
import pyarrow as pa

from ..errors import InvalidOptionError
from ..format.snapshot import Snapshot
from ..format.storage import frozen_options
from ..reader.join_probe import JoinSpec, OtherSide, join_buckets, join_partition, pair_rows, table_rows
from ..reader.lookup import ReadContext
from ..spec.arrays import distinct
from ..spec.column_mapping import table_schema
from ..spec.schema import arrow_schema
from .join import HOWS, JoinOptions, JoinPlan, cast_key, key_buckets, key_lists, plan_join, table_side
from .native import native_scan
from .types import spark_schema


# -- execution -----------------------------------------------------------------------------
def execute(plan: JoinPlan, snapshot: Snapshot, probe_df):
    """The joined DataFrame."""
    spark = probe_df.sparkSession
    if plan.strategy == "spark":
        # Only read without the connector: its read carries the bucketing either way, and
        # Spark (with the connector's UnneededBuckets) reads it plainly where it spares nothing.
        bucketed = plan.broadcast_probe is None
        return _spark_join(probe_df, native_scan(spark, snapshot, plan.columns, bucketed=bucketed), plan)
    if plan.strategy == "broadcast":
        return _broadcast(plan, snapshot, probe_df)
    return _shuffle(plan, snapshot, probe_df)


def spread_values(n: int, k: int) -> list[int]:
    """Per bucket b < n, an int whose Spark hash lands in partition b % k of k."""
    from ..spec.bucketing import bucket_ids

    found: dict[int, int] = {}
    v = 0
    while len(found) < k:
        j = int(bucket_ids([pa.array([v], pa.int32())], k)[0])
        found.setdefault(j, v)
        v += 1
    return [found[b % k] for b in range(n)]


def _spark_join(probe_df, table_df, plan: JoinPlan):
    if plan.using:
        return probe_df.join(table_df, on=plan.table_keys, how=plan.how)
    cond = functools.reduce(lambda a, b: a & b, [probe_df[p] == table_df[t] for t, p in zip(plan.table_keys, plan.probe_keys)])
    return probe_df.join(table_df, on=cond, how=plan.how)


def _broadcast(plan: JoinPlan, snapshot: Snapshot, probe_df):
    """Read the rows of the collected keys (their buckets only) on the driver, then let
    Spark join the probe with them, broadcast."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType

    side, keys = plan.side, plan.keys
    fields = spark_schema(snapshot.metadata.schema_).fields
    schema = arrow_schema(snapshot.metadata.schema_)
    wanted = [c for c in _table_columns(plan, snapshot) if plan.how != "semi" or c in plan.table_keys]
    read_cols = list(dict.fromkeys(wanted + list(side.hash_columns) + plan.table_keys))
    key_names = keys.column_names
    parts = []
    if keys.num_rows:
        buckets = key_buckets(keys, side)
        for b in distinct(buckets):
            bkeys = keys.filter(pa.array(buckets == b))
            rows = table_rows(side, int(b), bkeys, read_cols)
            _, t_of = pair_rows([bkeys.column(c) for c in key_names], [rows.column(c) for c in plan.table_keys])
            parts.append(rows.take(pa.array(distinct(t_of))).select(wanted))
    target = pa.schema([schema.field(c) for c in wanted])
    rows = pa.concat_tables([p.cast(target) for p in parts]) if parts else target.empty_table()
    sschema = StructType([f for f in fields if f.name in wanted])
    # One chunk: createDataFrame of a multi-chunk Arrow table lost rows here (pyspark 4.3).
    rows_df = probe_df.sparkSession.createDataFrame(rows.combine_chunks(), schema=sschema)
    return _spark_join(probe_df, F.broadcast(rows_df), plan)


def _table_columns(plan: JoinPlan, snapshot: Snapshot) -> list[str]:
    names = [f.name for f in snapshot.metadata.schema_]
    return names if plan.columns is None else [c for c in names if c in plan.columns]


def _output_layout(plan: JoinPlan, probe_cols: list[str], table_cols: list[str]):
    """(probe positions, table columns) in Spark's output order of the join."""
    if plan.using:
        key_pos = [probe_cols.index(k) for k in plan.probe_keys]
        probe_pos = key_pos + [i for i in range(len(probe_cols)) if i not in key_pos]
        table_out = [c for c in table_cols if c not in plan.table_keys]
    else:
        probe_pos = list(range(len(probe_cols)))
        table_out = list(table_cols)
    return probe_pos, ([] if plan.how == "semi" else table_out)


def _spec_and_final(plan: JoinPlan, snapshot: Snapshot, probe_fields, key_inputs, session_tz: str):
    """The tasks' JoinSpec, their Spark output schema, and the final (name, internal) columns."""
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import StructField, StructType

    tfields = {f.name: f for f in spark_schema(snapshot.metadata.schema_).fields}
    table_cols = _table_columns(plan, snapshot)
    probe_cols = [f.name for f in probe_fields]
    probe_pos, table_out = _output_layout(plan, probe_cols, table_cols)
    out_fields, final = [], []
    for i in probe_pos:
        name = f"_o{len(out_fields)}"
        out_fields.append(StructField(name, probe_fields[i].dataType, True))
        final.append((probe_fields[i].name, name))
    for c in table_out:
        name = f"_o{len(out_fields)}"
        out_fields.append(StructField(name, tfields[c].dataType, True))
        final.append((c, name))
    out_struct = StructType(out_fields)
    spec = JoinSpec(plan.how, tuple(zip(plan.table_keys, key_inputs)), tuple(table_out),
                    tuple(f"_p{i}" for i in probe_pos), to_arrow_schema(out_struct, timezone=session_tz))
    return spec, out_struct, final


def _shuffle(plan: JoinPlan, snapshot: Snapshot, probe_df):
    """Repartition the probe by Spark's hash into the table's buckets; task i joins bucket i."""
    from pyspark.sql import functions as F

    side = plan.side
    spark = probe_df.sparkSession
    probe_fields = list(probe_df.schema.fields)
    names = [f"_p{i}" for i in range(len(probe_fields))]
    p = probe_df.toDF(*names)
    tfields = {f.name: f for f in spark_schema(snapshot.metadata.schema_).fields}
    pos = {f.name: i for i, f in reversed(list(enumerate(probe_fields)))}
    key_inputs = [f"_k{j}" for j in range(len(plan.table_keys))]
    keys = [cast_key(F.col(names[pos[pk]]), tfields[t].dataType, probe_fields[pos[pk]].dataType).alias(k)
            for t, pk, k in zip(plan.table_keys, plan.probe_keys, key_inputs)]
    p = p.select(*[F.col(n) for n in names], *keys)
    key_of = dict(zip(plan.table_keys, key_inputs))
    hashed = [F.col(key_of[c]) for c in side.hash_columns]
    k = plan.partitions or side.num_buckets
    if k >= side.num_buckets:
        p = p.repartition(side.num_buckets, *hashed)  # partition i holds exactly bucket i
    else:
        # Bucket b goes to partition b % k: each bucket stays in one task (one trie build).
        bucket = F.pmod(F.hash(*hashed), F.lit(side.num_buckets))
        spread = F.element_at(F.array(*[F.lit(v) for v in spread_values(side.num_buckets, k)]), bucket + 1)
        p = p.repartition(k, spread)
    spec, out_struct, final = _spec_and_final(plan, snapshot, probe_fields, key_inputs,
                                             spark.conf.get("spark.sql.session.timeZone"))
    out = p.mapInArrow(functools.partial(join_partition, side, spec), out_struct)
    return out.select(*[F.col(internal).alias(name) for name, internal in final])


# -- join_table ----------------------------------------------------------------------------
def join_tables(a: Snapshot, b: Snapshot, spark, on=None, how: str = "inner", *, left_on=None, right_on=None):
    """``a.join_table(b)``: equal to ``b.to_df().join(a.to_df(), on, how)``. Bucket i of b
    meets bucket i of a (no shuffle) when b is bucketed by the keys a's side is hashed on,
    with the same types and bucket count; otherwise b is joined as a DataFrame."""
    from pyspark.sql import functions as F

    b_fields = list(spark_schema(b.metadata.schema_).fields)
    plan, reason = _co_bucketed(a, b, b_fields, on, how, left_on, right_on)
    if plan is None:
        df = native_scan(spark, b)
        plan = plan_join(a, df, on, how, JoinOptions(left_on=left_on, right_on=right_on))
        plan.reasons.insert(0, f"not co-bucketed ({reason}): the other table is joined as a DataFrame")
        return plan, execute(plan, a, df)
    side = plan.side
    pos = {f.name: i for i, f in reversed(list(enumerate(b_fields)))}
    key_inputs = [f"_p{pos[p]}" for p in plan.probe_keys]
    spec, out_struct, final = _spec_and_final(plan, a, b_fields, key_inputs, spark.conf.get("spark.sql.session.timeZone"))
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import StructType

    b_arrow = to_arrow_schema(StructType(b_fields), timezone=spark.conf.get("spark.sql.session.timeZone"))
    files: dict[int, list] = {}
    for f in sorted(b.files.values(), key=lambda f: f.path):
        files.setdefault(f.bucket, []).append(f)
    other = OtherSide(
        ReadContext(b.storage.url, frozen_options(b.storage.storage_options), b.metadata.id,
                    table_schema(b.metadata), tuple(b.metadata.indexColumns), {}, np.empty(0, np.int64)),
        {k: tuple(v) for k, v in files.items()}, tuple(f.name for f in b_fields),
        tuple(f"_p{i}" for i in range(len(b_fields))), tuple(b_arrow.types),
    )
    n = side.num_buckets
    ids = spark.range(0, n, 1, n)
    out = ids.mapInArrow(functools.partial(join_buckets, side, spec, other), out_struct)
    return plan, out.select(*[F.col(internal).alias(name) for name, internal in final])


def _co_bucketed(a: Snapshot, b: Snapshot, b_fields, on, how, left_on, right_on):
    how_key = HOWS.get(str(how).lower())
    if how_key is None:
        raise InvalidOptionError(f"how={how!r}: indexed joins support inner, left and semi")
    table_keys, probe_keys, using = key_lists(arrow_schema(a.metadata.schema_), [f.name for f in b_fields], on, left_on, right_on)
    a_types = arrow_schema(a.metadata.schema_)
    b_types = arrow_schema(b.metadata.schema_)
    if any(a_types.field(t).type != b_types.field(p).type for t, p in zip(table_keys, probe_keys)):
        return None, "the key types differ"
    side, text, _ = table_side(a, table_keys)
    if side is None:
        return None, "the table has no index or bucketing on the join keys"
    foreign = [f.path for f in b.files.values() if f.bucket is None]
    if foreign:
        return None, (f"the other table has {len(foreign)} file(s) without a bucket (added by another Delta "
                      f"writer, e.g. {foreign[0]}); optimize(mode='full') buckets them")
    mapped = tuple(probe_keys[table_keys.index(c)] for c in side.hash_columns)
    if mapped != tuple(b.metadata.indexColumns) or b.metadata.numBuckets != side.num_buckets:
        return None, (f"the other table is bucketed by {list(b.metadata.indexColumns)} into {b.metadata.numBuckets}, "
                      f"this side hashes {list(side.hash_columns)} into {side.num_buckets}")
    plan = JoinPlan("buckets", how_key, using, table_keys, probe_keys, side=side, side_text=text)
    plan.reasons.append(f"bucket by bucket: bucket i of the other table ({b.metadata.numBuckets} buckets by "
                        f"{list(b.metadata.indexColumns)}) meets bucket i of this one; neither is shuffled")
    return plan, None
