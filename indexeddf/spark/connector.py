"""The JVM connector: building its jar and putting it on a Spark session.

The connector (``connector/src/main/java/io/indexeddf/``: the packages ``log``, with no Spark
import, ``spark``, ``spark.plan`` and ``spark.exec``; every ``.java`` under ``connector/src/main``
is compiled, and its ``resources`` packed) is the Spark data source ``indexeddf`` in the JVM: it replays the Delta log itself and reads with Spark's own
Parquet reader (docs/spark.md). The constants it shares with the Python reader (hash seeds,
the key cap, staleness defaults, readable features, ...) are not in its sources: the jar holds
:func:`indexeddf.spec.shared.shared_json` as ``io/indexeddf/log/spec.json``, written here from
``indexeddf/spec/``, the one place they are defined. It is compiled here with the JDK's
``javac`` against the jars pyspark ships (no Maven, no Scala compiler), into
``indexeddf/spark/jars/indexeddf-connector.jar``, and rebuilt whenever the sources'
content hash (kept next to the jar) changes.

- :func:`build_jar`: compile the jar if it is missing or stale; returns its path.
- :func:`jar_path`: where the jar is (built or not).
- :func:`configure`: add the jar to a ``SparkSession.Builder``'s ``spark.jars``.
- :func:`spark_conf` / :func:`submit_args`: the same settings as a dict, or as
  ``spark-submit`` arguments (for a Spark Connect server: ``start-connect-server.sh``).
"""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import warnings
import zipfile
from pathlib import Path

from ..spec.shared import RESOURCE as SHARED_RESOURCE
from ..spec.shared import shared_json

__all__ = ["build_jar", "jar_path", "configure", "spark_conf", "submit_args", "sources_dir", "ConnectorBuildError",
           "EXTENSIONS"]

JAR_NAME = "indexeddf-connector.jar"
_HERE = Path(__file__).resolve().parent


class ConnectorBuildError(RuntimeError):
    """The connector's jar could not be built (``javac`` missing or failing)."""


def sources_dir() -> Path:
    """The connector's source tree (``connector/src/main``) next to the package."""
    return _HERE.parent.parent / "connector" / "src" / "main"


def jar_path() -> Path:
    """Where the connector's jar is built (``indexeddf/spark/jars/indexeddf-connector.jar``);
    it may not exist yet (see :func:`build_jar`)."""
    return _HERE / "jars" / JAR_NAME


def _hash_path() -> Path:
    return jar_path().with_suffix(".sha256")


def _source_files() -> list[Path]:
    root = sources_dir()
    return sorted(p for p in root.rglob("*") if p.is_file())


def sources_hash() -> str:
    """The SHA-256 of the connector's sources (names and contents), the constants it shares
    with Python (:func:`indexeddf.spec.shared.shared_json`), and the pyspark version they
    compile against."""
    import pyspark

    h = hashlib.sha256(f"pyspark {pyspark.__version__}\n".encode())
    h.update(b"shared\0" + shared_json() + b"\0")
    root = sources_dir()
    for p in _source_files():
        h.update(str(p.relative_to(root)).encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def _pyspark_jars() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent / "jars"


def is_built() -> bool:
    """Whether the jar exists and was built from the current sources."""
    try:
        return jar_path().is_file() and _hash_path().read_text().strip() == sources_hash()
    except OSError:
        return False


def build_jar(force: bool = False) -> Path:
    """Compile the connector into :func:`jar_path` unless it is already built from the
    current sources; returns the jar's path.

    Runs ``javac --release 17 -cp <pyspark's jars>/*`` and packs the classes,
    ``META-INF/services`` and the shared constants (``io/indexeddf/log/spec.json``) into the
    jar (written atomically). Raises :class:`ConnectorBuildError` when there is no ``javac``
    or it fails.
    """
    if not sources_dir().is_dir():
        raise ConnectorBuildError(f"the connector's sources are not at {sources_dir()} (an installed package "
                                  "without the source tree: build the jar from a clone)")
    digest = sources_hash()
    if not force and is_built():
        return jar_path()
    javac = shutil.which("javac")
    if javac is None and os.environ.get("JAVA_HOME"):
        candidate = Path(os.environ["JAVA_HOME"]) / "bin" / "javac"
        javac = str(candidate) if candidate.exists() else None
    if javac is None:
        raise ConnectorBuildError("javac (a JDK, 17 or newer) is not on PATH: the JVM connector cannot be built")
    java_files = [str(p) for p in _source_files() if p.suffix == ".java"]
    with tempfile.TemporaryDirectory(prefix="indexeddf-javac-") as tmp:
        classes = Path(tmp) / "classes"
        classes.mkdir()
        done = subprocess.run(
            [javac, "--release", "17", "-nowarn", "-encoding", "UTF-8", "-cp", str(_pyspark_jars() / "*"),
             "-d", str(classes), *java_files],
            capture_output=True, text=True,
        )
        if done.returncode != 0:
            raise ConnectorBuildError(f"javac failed:\n{done.stdout}{done.stderr}")
        resources = sources_dir() / "resources"
        jar = jar_path()
        jar.parent.mkdir(parents=True, exist_ok=True)
        partial = jar.with_suffix(f".{os.getpid()}.tmp")
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as z:
            z.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\nCreated-By: indexeddf build_jar\n\n")
            for p in sorted(classes.rglob("*.class")):
                z.write(p, str(p.relative_to(classes)))
            z.writestr(SHARED_RESOURCE, shared_json())
            if resources.is_dir():
                for p in sorted(resources.rglob("*")):
                    if p.is_file():
                        z.write(p, str(p.relative_to(resources)))
        os.replace(partial, jar)
        _hash_path().write_text(digest + "\n")
    return jar_path()


def configure(builder, build: bool = True):
    """Put the connector's jar on a ``SparkSession.Builder`` and return the builder.

    Appends the jar to ``spark.jars`` and the connector's session extensions (for
    ``SELECT ... FROM indexeddf.`/path```) to ``spark.sql.extensions``, keeping any values
    already set on the builder, as delta-spark's ``configure_spark_with_delta_pip`` does, and
    sets :data:`ORDERED_BUCKETS` and the session catalog (:data:`CATALOG`) unless the builder has a
    value for them. With ``build`` the jar is
    built first when missing or stale; when it cannot be (no JDK), the builder is
    returned unchanged with a warning, and ``indexeddf.register(spark)`` then registers
    the Python data source as ``indexeddf``.
    """
    try:
        conf = spark_conf(build)
    except ConnectorBuildError as e:
        warnings.warn(f"indexeddf: the JVM connector is not available ({e}); Spark will read through the "
                      "Python data source (no column pruning, no native Parquet speed)", stacklevel=2)
        return builder
    options = getattr(builder, "_options", {}) or {}
    for key, value in conf.items():
        if key in _LIST_SETTINGS:
            builder = builder.config(key, _appended(builder, key, value))
        elif key not in options:  # a value the user set wins
            builder = builder.config(key, value)
    return builder


_LIST_SETTINGS = ("spark.jars", "spark.sql.extensions")
"""Comma-separated settings the connector's value is appended to."""
ORDERED_BUCKETS = "spark.sql.legacy.bucketedTableScan.outputOrdering"
"""Spark's switch (off by default since Spark 3.0) that lets a bucketed scan whose buckets are
single files report the table's sort columns, so a merge join on them sorts only the
other side. indexeddf's files are sorted by the index columns (PROTOCOL.md §4.3.1), so
:func:`spark_conf` turns it on; it also applies to Spark's own ``bucketBy().sortBy()``
tables with one file per bucket, whose files Spark sorted when writing them."""


def spark_conf(build: bool = True) -> dict[str, str]:
    """The Spark settings that put the connector on a session, as a dict:
    ``{"spark.jars": <the jar>, "spark.sql.extensions": EXTENSIONS, ORDERED_BUCKETS: "true",
    SESSION_CATALOG: CATALOG}`` (:data:`ORDERED_BUCKETS`, :data:`CATALOG`).

    For anything that takes Spark settings rather than a ``SparkSession.Builder``: a
    Spark Connect server (:func:`submit_args`), ``spark-defaults.conf``, a cluster's
    configuration. With ``build`` the jar is built first when missing or stale. Raises
    :class:`ConnectorBuildError` when there is no jar and it cannot be built.
    """
    jar = build_jar() if build else jar_path()
    if not jar.is_file():
        raise ConnectorBuildError(f"no connector jar at {jar}; run indexeddf.spark.connector.build_jar()")
    return {"spark.jars": str(jar), "spark.sql.extensions": EXTENSIONS, ORDERED_BUCKETS: "true",
            SESSION_CATALOG: CATALOG}


def submit_args(build: bool = True) -> list[str]:
    """:func:`spark_conf` as ``spark-submit`` arguments (``["--conf", "spark.jars=...", ...]``),
    for ``spark-submit``, ``pyspark`` and ``sbin/start-connect-server.sh``.

    ``python -m indexeddf.spark.connector --submit-args`` prints them shell-quoted, so a
    Spark Connect server with the connector starts with (docs/spark.md)::

        "$SPARK_HOME"/sbin/start-connect-server.sh $(python -m indexeddf.spark.connector --submit-args)

    Raises :class:`ConnectorBuildError` like :func:`spark_conf`.
    """
    args: list[str] = []
    for key, value in spark_conf(build).items():
        args += ["--conf", f"{key}={value}"]
    return args


SESSION_CATALOG = "spark.sql.catalog.spark_catalog"
"""Spark's setting naming the session catalog's implementation."""
CATALOG = "io.indexeddf.spark.IndexedDFCatalog"
"""The connector's session catalog (:data:`SESSION_CATALOG`), as delta-spark's ``DeltaCatalog``: catalog
entries with provider ``indexeddf`` and ``indexeddf.`/path``` are loaded from the table's log, with
Spark's time travel (``VERSION AS OF``, ``TIMESTAMP AS OF``, ``@v`` suffixes)."""
EXTENSIONS = "io.indexeddf.spark.IndexedDFExtensions"
"""The connector's session extensions (``SELECT ... FROM indexeddf.`/path```)."""


def _appended(builder, key: str, value: str) -> str:
    """``key``'s value on the builder with ``value`` appended (comma-separated), once."""
    options = getattr(builder, "_options", {}) or {}
    parts = [p for p in str(options.get(key) or "").split(",") if p.strip()]
    if value not in parts:
        parts.append(value)
    return ",".join(parts)


def _main(argv: list[str] | None = None) -> int:
    """``python -m indexeddf.spark.connector``: build the jar (set-up runs this); warns
    and exits 0 without a JDK. With ``--submit-args``: print :func:`submit_args`
    shell-quoted on one line (building the jar if needed); exits 1 without a jar."""
    argv = sys.argv[1:] if argv is None else argv
    if argv == ["--submit-args"]:
        try:
            print(shlex.join(submit_args()))
        except ConnectorBuildError as e:
            print(f"error: indexeddf: {e}", file=sys.stderr)
            return 1
        return 0
    if argv:
        print("usage: python -m indexeddf.spark.connector [--submit-args]", file=sys.stderr)
        return 2
    try:
        print(f"indexeddf: connector jar at {build_jar()}")
    except ConnectorBuildError as e:
        print(f"warning: indexeddf: the JVM connector was not built: {e}. Spark will use the Python data "
              "source (no column pruning, no native Parquet speed).")
    return 0


if __name__ == "__main__":
    sys.exit(_main())
