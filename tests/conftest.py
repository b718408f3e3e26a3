"""Shared fixtures: one local Spark session per test run."""

from __future__ import annotations

import os
import sys

import pytest
from standalone_cluster import cluster  # noqa: F401  (a session fixture: one cluster for the run)

# Spark's Python workers must run this interpreter (the virtual environment's), or
# they will not find the package.
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


@pytest.fixture(scope="session")
def spark():
    """A real local Spark session, started once for the whole run, with the JVM connector
    (``indexeddf.configure``): ``format("indexeddf")`` is the connector in every Spark test."""
    from pyspark.sql import SparkSession

    import indexeddf

    builder = (
        SparkSession.builder.master("local[2]")
        .appName("indexeddf-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "2g")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
    )
    session = indexeddf.configure(builder).getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture
def table_path(tmp_path):
    """A fresh local folder path for a table."""
    return str(tmp_path / "table")


@pytest.fixture
def conf(spark):
    """Sets Spark confs for one test: ``conf(key, value)``; unset again after it."""
    changed = []

    def set_(key, value):
        changed.append(key)
        spark.conf.set(key, value)

    yield set_
    for key in changed:
        spark.conf.unset(key)
