"""Delta's type widening (the ``typeWidening`` table feature): a column's type may have
been widened after files were written with the narrower one.

Readers cast every file's column to the table's type (``format/datafiles.py``), which is
all Delta asks of a reader besides checking that each change the schema records under
``delta.typeChanges`` is one it defines (Delta PROTOCOL.md, "Type Widening"): integers to
wider integers, ``float`` to ``double``, ``byte``/``short``/``integer`` to ``double``,
``date`` to ``timestamp_ntz``, and decimals to a precision and scale at least as large
(integers to decimals wide enough). Anything else is refused by name.
"""

from __future__ import annotations

import re

from ..errors import UnsupportedFeatureError

TYPE_CHANGES = "delta.typeChanges"
"""The column metadata key that records a column's type changes."""
FEATURES = ("typeWidening", "typeWidening-preview")
"""The feature's name, and the name Delta 3.x's preview wrote."""

_INTEGERS = ("byte", "short", "integer", "long")
_DECIMAL = re.compile(r"^decimal\((\d+),\s*(\d+)\)$")
_INTEGER_DIGITS = {"byte": 10, "short": 10, "integer": 10, "long": 20}  # Delta's minimum decimal precision


def supported(from_type: str, to_type: str) -> bool:
    """Whether Delta defines the widening of ``from_type`` to ``to_type``."""
    if from_type in _INTEGERS and to_type in _INTEGERS:
        return _INTEGERS.index(from_type) < _INTEGERS.index(to_type)
    if to_type == "double" and from_type in ("float", "byte", "short", "integer"):
        return True
    if (from_type, to_type) == ("date", "timestamp_ntz"):
        return True
    to_dec = _DECIMAL.match(to_type)
    if to_dec is None:
        return False
    p2, s2 = int(to_dec.group(1)), int(to_dec.group(2))
    if from_type in _INTEGER_DIGITS:
        return p2 - s2 >= _INTEGER_DIGITS[from_type]
    from_dec = _DECIMAL.match(from_type)
    if from_dec is None:
        return False
    p1, s1 = int(from_dec.group(1)), int(from_dec.group(2))
    return p2 - p1 >= s2 - s1 >= 0


def check_type_changes(column: str, changes) -> None:
    """Refuse a column whose ``delta.typeChanges`` holds a change Delta does not define
    (or one in a nested field: only top-level columns are read)."""
    if not isinstance(changes, list) or not all(isinstance(c, dict) for c in changes):
        raise UnsupportedFeatureError("typeWidening", f"column {column!r}: {TYPE_CHANGES} must be a list of objects")
    for c in changes:
        if c.get("fieldPath") is not None or not supported(str(c.get("fromType")), str(c.get("toType"))):
            raise UnsupportedFeatureError(
                "typeWidening",
                f"column {column!r} was changed from {c.get('fromType')} to {c.get('toType')}"
                f"{' at ' + str(c['fieldPath']) if c.get('fieldPath') else ''}, a type change indexeddf does not "
                "read; read the table with Spark and delta-spark")


def check_indexed_columns_kept(old, new, columns) -> None:
    """Refuse a ``metaData`` (``new``, after ``old``) in which another engine widened one of
    the indexed ``columns`` (recorded in ``delta.typeChanges``): the table's buckets and
    index entries hash the values of the old type, and would miss the rows of the new one."""
    if old is None:
        return
    before = {f.name: f.type for f in old.schema_}
    for f in new.schema_:
        if f.name in columns and f.name in before and before[f.name] != f.type and TYPE_CHANGES in f.metadata:
            raise UnsupportedFeatureError(
                "typeWidening",
                f"index column {f.name!r} was widened from {before[f.name]} to {f.type} after indexeddf indexed the "
                "table: its buckets and index files hash the old type. Read the table with DuckDB's delta extension "
                "or Spark and delta-spark, or overwrite it with indexeddf to index the new type")
