"""Options of the Spark data source ``indexeddf``: names, parsing and validation.

Spark hands a Python data source its options in a case-insensitive dict with lower-cased
keys, plus some of its own (``path``; ``checkpointLocation`` for streams). Every
option is checked here: an unknown name raises ``InvalidOptionError`` listing the known
ones, so a typo never passes silently. ``docs/spark.md`` documents each option.
"""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa

from ..errors import InvalidOptionError, SchemaMismatchError
from ..spec import config
from ..spec.bucket_count import MAX_BUCKETS, default_num_buckets
from ..spec.config import CHECKED_OPTION
from ..spec.schema import Field, fields_from_arrow

SIZE_OPTION = "_sizeInBytes"
"""Private option the connector sets on a write that may create a table without ``numBuckets``:
Spark's estimate of the written plan's bytes (``sizeInBytes``), from which
:func:`new_table_buckets` chooses the count."""

# -- options ------------------------------------------------------------------------
PARTITION_COLUMNS_OPTION = "__partition_columns"
"""Spark's own option for ``partitionBy(...)`` (a JSON list of the columns)."""

# Spark lower-cases option names; these map them back to the names users write.
_COMMON = ["path", "storageOptions"]
READ_OPTIONS = _COMMON + ["versionAsOf", "timestampAsOf", "maxPartitionBytes"]
_CREATE = ["indexColumns", "numBuckets", "name", "description", "tableProperties"]
WRITE_OPTIONS = _COMMON + _CREATE + ["saveMode", "overwriteSchema", "mergeSchema", "replaceWhere", "txnAppId",
                                     "txnVersion", "_commitResultFile", "_addColumns", "_setProperties",
                                     "_unsetProperties", "_replaceTable", "_dynamicPartitionOverwrite", SIZE_OPTION,
                                     PARTITION_COLUMNS_OPTION, CHECKED_OPTION]
STREAM_OPTIONS = _COMMON + _CREATE + ["mergeSchema", "txnAppId", "checkpointLocation", CHECKED_OPTION]
_PROPERTY_NAMES = {name.lower(): name for name in config.PROPERTIES}
SAVE_MODES = ("append", "overwrite", "errorifexists", "error", "ignore")


def parse_options(options: Any, known: list[str], what: str) -> dict[str, str]:
    """Options keyed by their canonical names; refuses unknown names.

    ``indexeddf.*`` names are table properties (validated by :mod:`indexeddf.spec.config`)
    and allowed only where a table can be created.
    """
    canon = {k.lower(): k for k in known}
    out: dict[str, str] = {}
    for key, value in dict(options or {}).items():
        low = key.lower()
        if low in canon:
            out[canon[low]] = value
        elif low.startswith("indexeddf.") and "indexColumns" in known:
            out[_PROPERTY_NAMES.get(low, key)] = value
        elif low == "paths":
            raise InvalidOptionError(f"{what} takes one table location, got several: {value}")
        else:
            shown = ", ".join(k for k in known if not k.startswith("_"))
            extra = ", indexeddf.<table property>" if "indexColumns" in known else ""
            raise InvalidOptionError(f"unknown option {key!r} for {what}; known options: {shown}{extra}")
    return out


def partition_by_option(opts: dict[str, str]) -> list[str] | None:
    """The columns of ``partitionBy(...)`` (None when the write has none)."""
    raw = opts.get(PARTITION_COLUMNS_OPTION)
    if raw is None:
        return None
    try:
        columns = json.loads(raw)
    except ValueError:
        columns = None
    if not isinstance(columns, list) or not all(isinstance(c, str) for c in columns):
        raise InvalidOptionError(f"partitionBy(...) gave unreadable columns {raw!r}")
    return columns


def option_path(opts: dict[str, str]) -> str:
    """The table location (``.load(path)`` / ``.save(path)`` / ``.start(path)``)."""
    path = opts.get("path")
    if not path:
        raise InvalidOptionError("indexeddf needs the table location: .load(path), .save(path) or .start(path)")
    return path


def shared_storage(url: str, options: dict[str, Any]):
    """The table's storage, refused when Spark's worker processes cannot see it."""
    from ..format.storage import TableStorage

    storage = TableStorage(url, options)
    protocol = storage.fs.protocol
    protocols = set(protocol) if isinstance(protocol, (tuple, list)) else {protocol}
    if protocols & {"memory", "memfs"}:
        raise InvalidOptionError(
            f"{url} is in fsspec's in-memory filesystem, which exists only in one Python process; "
            "Spark reads and writes in its own worker processes. Use a local or shared location."
        )
    return storage


def storage_options(opts: dict[str, str]) -> dict[str, Any]:
    """fsspec storage options from the ``storageOptions`` option (a JSON object)."""
    return _json_object(opts.get("storageOptions"), "storageOptions")


def table_properties(opts: dict[str, str]) -> dict[str, str]:
    """Table properties given as options: ``tableProperties`` (a JSON object, for any
    name) and ``indexeddf.*`` options; validated by :mod:`indexeddf.spec.config`."""
    props = {k: v for k, v in opts.items() if k.startswith("indexeddf.")}
    return config.validate({**_json_properties(opts.get("tableProperties")), **props})


def property_changes(opts: dict[str, str]) -> tuple[dict[str, str], list[str], bool] | None:
    """``ALTER TABLE ... SET / UNSET TBLPROPERTIES`` as the connector passes them (the private
    options ``_setProperties``, a JSON object, and ``_unsetProperties``, a JSON object
    ``{"names": [...], "ifExists": bool}``): the properties to set, the names to remove and
    whether absent names are ignored; None when the write is not one."""
    if opts.get("_setProperties") is None and opts.get("_unsetProperties") is None:
        return None
    updates = _json_properties(opts.get("_setProperties"))
    unset = _json_object(opts.get("_unsetProperties"), "_unsetProperties")
    names = unset.get("names", [])
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise InvalidOptionError(f"_unsetProperties: names must be a list of strings, got {names!r}")
    return updates, names, bool(unset.get("ifExists", False))


def _json_properties(raw: str | None) -> dict[str, str]:
    return {str(k): str(v) for k, v in _json_object(raw, "tableProperties").items()}


def _json_object(raw: str | None, name: str) -> dict:
    """The JSON object an option holds ({} when unset)."""
    if not raw:
        return {}
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as e:
        raise InvalidOptionError(f"{name} must be a JSON object, got {raw!r} ({e.msg})") from None
    if not isinstance(value, dict):
        raise InvalidOptionError(f"{name} must be a JSON object, got {raw!r}")
    return value


def int_option(opts: dict[str, str], name: str, default: int | None, lo: int, hi: int | None = None) -> int | None:
    """An integer option in ``lo..hi``, or ``default`` when absent."""
    raw = opts.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise InvalidOptionError(f"option {name} must be an integer, got {raw!r}") from None
    if value < lo or (hi is not None and value > hi):
        bound = f"{lo}..{hi}" if hi is not None else f">= {lo}"
        raise InvalidOptionError(f"option {name} must be in {bound}, got {value}")
    return value


def new_table_buckets(opts: dict[str, str], props: dict[str, str]) -> int:
    """The bucket count of a table a write creates: ``numBuckets``, else the count that the
    plan's estimated size (:data:`SIZE_OPTION`) and the table's properties give
    (``spec/bucket_count.py``; 16 without an estimate)."""
    given = int_option(opts, "numBuckets", None, 1, MAX_BUCKETS)
    if given is not None:
        return given
    return default_num_buckets(int_option(opts, SIZE_OPTION, None, 0), props)


def bool_option(opts: dict[str, str], name: str) -> bool:
    raw = str(opts.get(name, "false")).strip().lower()
    if raw not in ("true", "false"):
        raise InvalidOptionError(f"option {name} must be true or false, got {opts.get(name)!r}")
    return raw == "true"


def index_columns_option(raw: str) -> list[str]:
    """``"a,b"`` or a JSON list ``'["a", "b"]'`` (for names with commas)."""
    raw = raw.strip()
    if raw.startswith("["):
        try:
            cols = json.loads(raw)
        except json.JSONDecodeError as e:
            raise InvalidOptionError(f"indexColumns: not a JSON list ({e.msg}): {raw!r}") from None
        if not isinstance(cols, list) or not all(isinstance(c, str) for c in cols):
            raise InvalidOptionError(f"indexColumns must be a list of column names, got {raw!r}")
    else:
        cols = [c.strip() for c in raw.split(",")]
    if not cols or any(not c for c in cols):
        raise InvalidOptionError(f"indexColumns must name at least one column, got {raw!r}")
    return cols


# -- Spark schema -> log schema --------------------------------------------------------
def arrow_schema_of(spark_schema) -> pa.Schema:
    """The Arrow schema of a Spark ``StructType`` (timestamps in UTC)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    try:
        return to_arrow_schema(spark_schema, timezone="UTC")
    except Exception as e:  # pyspark raises its own errors for types Arrow cannot hold
        raise SchemaMismatchError(f"the DataFrame has a column type indexeddf cannot store: {e}") from None


def fields_of(spark_schema) -> tuple[Field, ...]:
    """Log fields for a new table written from Spark: every column nullable (as Delta)."""
    schema = arrow_schema_of(spark_schema)
    return fields_from_arrow(pa.schema([f.with_nullable(True) for f in schema]))




def json_option(opts: dict[str, str], name: str, operations: tuple[str, ...]) -> dict:
    """The JSON object an option carries (a statement the connector hands the writer), with
    an ``operation`` among ``operations``."""
    try:
        spec = json.loads(opts[name])
    except ValueError as e:
        raise InvalidOptionError(f"the option {name} is not JSON: {e}") from None
    if spec.get("operation") not in operations:
        raise InvalidOptionError(f"{name}: unknown operation {spec.get('operation')!r}")
    return spec
