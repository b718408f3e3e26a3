"""The three streams of the pipeline test (tests/test_spark_pipeline.py), shared with the
separate Spark application the test kills (``python tests/pipeline_stages.py silver ...``).

- bronze: raw JSON events (``id``, ``seq``, ``v``) appended to an
  indexeddf table by ``writeStream.format("indexeddf")``, with no ``txnAppId``: the sink keys
  each commit on the query's id;
- silver: bronze read as a stream, each micro-batch MERGEd into a table keyed on ``id`` (the
  newest ``seq`` wins) by Spark SQL in ``foreachBatch``, made idempotent with Delta's
  ``txnAppId`` / ``txnVersion`` session confs (the batch id as the version);
- gold: silver read as a stream with ``skipChangeCommits`` (commits that rewrite rows are
  skipped, inserts-only MERGEs are read) and appended to a third table.

Every run is ``Trigger.AvailableNow`` from the stage's checkpoint.
"""

from __future__ import annotations

import os
import sys
import time

EVENTS_SCHEMA = "id long, seq long, v string"
SILVER_APP = "silver-merge"
"""The ``txnAppId`` of the silver stage's MERGEs."""


def _finish(query) -> None:
    query.awaitTermination()
    if query.exception() is not None:
        raise query.exception()


def bronze(spark, source: str, table: str, checkpoint: str):
    """Raw events into bronze; returns the finished query."""
    events = spark.readStream.schema(EVENTS_SCHEMA).json(source)
    query = (events.writeStream.format("indexeddf").option("checkpointLocation", checkpoint)
             .option("indexColumns", "id").option("numBuckets", 2).trigger(availableNow=True).start(table))
    _finish(query)
    return query


def merge_batch(silver: str, pause_after_merge: float = 0.0):
    """The ``foreachBatch`` function of the silver stage: one idempotent MERGE per micro-batch
    (``pause_after_merge``: seconds to wait after the MERGE committed, before Spark records the
    batch: the window in which the test kills the process)."""

    def run(batch, batch_id: int) -> None:
        session = batch.sparkSession
        from pyspark.sql import functions as F

        # A MERGE source matches each target row once: the batch's newest event of each id.
        (batch.groupBy("id").agg(F.max("seq").alias("seq"), F.max_by("v", "seq").alias("v"))
         .createOrReplaceTempView("silver_updates"))
        session.conf.set("spark.databricks.delta.write.txnAppId", SILVER_APP)
        session.conf.set("spark.databricks.delta.write.txnVersion", str(batch_id))
        try:
            session.sql(f"MERGE INTO indexeddf.`{silver}` AS t USING silver_updates AS s ON t.id = s.id "
                        "WHEN MATCHED AND s.seq > t.seq THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *")
        finally:
            session.conf.unset("spark.databricks.delta.write.txnAppId")
            session.conf.unset("spark.databricks.delta.write.txnVersion")
        if pause_after_merge:
            print(f"merged batch {batch_id}", flush=True)
            time.sleep(pause_after_merge)

    return run


def silver(spark, bronze_table: str, table: str, checkpoint: str, pause_after_merge: float = 0.0):
    """Bronze's new rows MERGEd into silver."""
    query = (spark.readStream.format("indexeddf").load(bronze_table)
             .writeStream.foreachBatch(merge_batch(table, pause_after_merge))
             .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
    _finish(query)
    return query


def gold(spark, silver_table: str, table: str, checkpoint: str):
    """Silver's insert-only commits appended to gold."""
    query = (spark.readStream.format("indexeddf").option("skipChangeCommits", "true").load(silver_table)
             .writeStream.format("indexeddf").option("checkpointLocation", checkpoint)
             .option("indexColumns", "id").option("numBuckets", 2).trigger(availableNow=True).start(table))
    _finish(query)
    return query


if __name__ == "__main__":
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    import indexeddf

    # python tests/pipeline_stages.py silver <bronze> <silver> <checkpoint> <pause> <go file>: the
    # session starts at once, the stream when <go file> exists (the test starts this process early).
    stage, bronze_path, silver_path, ck, pause, go = sys.argv[1:]
    assert stage == "silver"
    session = indexeddf.local_session("indexeddf-pipeline-silver", cores=1, driver_memory="1g", shuffle_partitions=2)
    deadline = time.time() + 600
    while not os.path.exists(go) and time.time() < deadline:
        time.sleep(0.05)
    silver(session, bronze_path, silver_path, ck, float(pause))
    session.stop()
