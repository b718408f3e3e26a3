"""Delta's column mapping: the names a table's data files use, apart from the names it shows.

With ``delta.columnMapping.mode`` = ``name`` or ``id`` (Delta PROTOCOL.md, "Column
Mapping"), every column has a *physical name* (``delta.columnMapping.physicalName`` in its
schema metadata) and an id (``delta.columnMapping.id``; the largest ever given is
``delta.columnMapping.maxColumnId``). Data files, ``partitionValues`` and the ``stats`` of
an ``add`` use the physical names; everything a user sees uses the logical ones.

indexeddf keeps this a rename at the file boundary: :func:`file_schema` is the table's
Arrow schema with each column's physical name, Parquet field id and the mode in its field
metadata, and the code that reads a file (``format/datafiles.py``) or writes one
(``writer/files.py``) renames through it; every other layer sees logical names only. In
``id`` mode a file's column is found by its Parquet field id (by its physical name when
the file has no field ids); in ``name`` mode by its physical name. A column a file lacks
reads as NULL in both. Fields nested in struct, array and map columns are mapped too
(``spec/nested_mapping.py``): the column's ``file_schema`` field carries its type's JSON,
whose nested fields hold their own physical names and ids.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping

import pyarrow as pa

from . import nested_mapping
from .schema import Field, arrow_schema
from .types import type_text, type_value

MODE = "delta.columnMapping.mode"
"""The table property that turns column mapping on (``none``, ``name`` or ``id``)."""
MAX_COLUMN_ID = "delta.columnMapping.maxColumnId"
"""The table property holding the largest column id ever assigned."""
PHYSICAL_NAME = "delta.columnMapping.physicalName"
"""A column's physical name, in its schema metadata."""
COLUMN_ID = "delta.columnMapping.id"
"""A column's id, in its schema metadata (its Parquet ``field_id``)."""
FEATURE = "columnMapping"
"""Delta's table feature (reader 2 / writer 5 in legacy versions)."""

_PHYSICAL = PHYSICAL_NAME.encode()
_FIELD_ID = b"PARQUET:field_id"  # the key pyarrow reads and writes a Parquet field id under
_MODE = MODE.encode()
_NESTED = b"indexeddf.columnMapping.nested"  # a nested column's type JSON, whose fields are mapped


def mapping_mode(configuration: Mapping[str, str]) -> str:
    """The table's column mapping mode: ``none``, ``name`` or ``id``."""
    return configuration.get(MODE, "none").lower()


def is_mapped(configuration: Mapping[str, str]) -> bool:
    """Whether the table's files use physical names (mode ``name`` or ``id``)."""
    return mapping_mode(configuration) in ("name", "id")


def file_schema(fields, configuration: Mapping[str, str]) -> pa.Schema:
    """The table's Arrow schema (logical names) carrying, per column of a mapped table, the
    physical name, field id and mode that files are read and written with; the plain
    :func:`arrow_schema` when the table is not mapped."""
    schema = arrow_schema(fields)
    mode = mapping_mode(configuration)
    if mode not in ("name", "id"):
        return schema
    out = []
    for f, af in zip(fields, schema):
        meta = {_PHYSICAL: str(f.metadata.get(PHYSICAL_NAME, f.name)).encode(), _MODE: mode.encode()}
        if f.metadata.get(COLUMN_ID) is not None:
            meta[_FIELD_ID] = str(int(f.metadata[COLUMN_ID])).encode()
        if f.nested and nested_mapping.is_mapped_type(type_value(f.type)):
            meta[_NESTED] = f.type.encode()
        out.append(af.with_metadata(meta))
    return pa.schema(out)


def physical_name(field: pa.Field) -> str:
    """The name ``field`` (of a :func:`file_schema`) has in data files and in the log's
    ``partitionValues`` and ``stats``."""
    meta = field.metadata or {}
    return meta[_PHYSICAL].decode() if _PHYSICAL in meta else field.name


def physical_names(schema: pa.Schema) -> dict[str, str]:
    """Logical name -> physical name of every column of ``schema`` (a :func:`file_schema`)."""
    return {f.name: physical_name(f) for f in schema}


def resolve(file_fields: pa.Schema, field: pa.Field) -> str | None:
    """The name of the column of a file (``file_fields``: its Arrow schema) that holds the
    table column ``field`` (of a :func:`file_schema`), or None when the file lacks it."""
    meta = field.metadata or {}
    if meta.get(_MODE) == b"id" and _FIELD_ID in meta:
        ids = {(f.metadata or {}).get(_FIELD_ID): f.name for f in file_fields}
        if any(k is not None for k in ids):  # a file with field ids: only the id decides
            return ids.get(meta[_FIELD_ID])
    name = physical_name(field)
    return name if name in file_fields.names else None


def logical_column(column, field: pa.Field):
    """A ``column`` a file stores for the table column ``field`` (of a :func:`file_schema`),
    with its nested fields under their logical names (unchanged when none is mapped)."""
    meta = field.metadata or {}
    if _NESTED not in meta:
        return column
    return nested_mapping.to_logical(column, type_value(meta[_NESTED].decode()), meta.get(_MODE) == b"id", field.type)


def plain(schema: pa.Schema) -> pa.Schema:
    """``schema`` without the mapping's field metadata: what readers return."""
    if not any(f.metadata for f in schema):
        return schema
    return pa.schema([pa.field(f.name, f.type, f.nullable) for f in schema])


def to_physical(rows: pa.Table, schema: pa.Schema) -> pa.Table:
    """``rows`` (logical column names, those of ``schema`` or a subset) renamed as files store
    them, each column with its Parquet field id, ready to be written."""
    if not any(_PHYSICAL in (f.metadata or {}) for f in schema):
        return rows
    fields, renamed = [], set()
    for f in rows.schema:
        at = schema.get_field_index(f.name)
        if at < 0:
            fields.append(f)
            continue
        meta = schema.field(at).metadata or {}
        keep = {k: v for k, v in meta.items() if k == _FIELD_ID}
        t = f.type
        if _NESTED in meta:  # nested fields named physically too, with their field ids
            t = nested_mapping.physical_type(t, type_value(meta[_NESTED].decode()))
            renamed.add(len(fields))
        fields.append(pa.field(physical_name(schema.field(at)), t, f.nullable, metadata=keep or None))
    columns = [pa.chunked_array([x.view(f.type) for x in c.chunks], f.type) if i in renamed else c
               for i, (c, f) in enumerate(zip(rows.columns, fields))]
    return pa.Table.from_arrays(columns, schema=pa.schema(fields))


def assign(fields: tuple[Field, ...], configuration: Mapping[str, str]) -> tuple[tuple[Field, ...], dict[str, str]]:
    """``fields`` with a physical name and an id for every column that has none yet, and the
    configuration with ``delta.columnMapping.maxColumnId`` raised past them, as Delta's
    writers assign them (``col-<uuid>`` names; ids from one more than the largest given).
    Unchanged when the table is not mapped."""
    if not is_mapped(configuration):
        return fields, dict(configuration)
    used = [int(f.metadata[COLUMN_ID]) for f in fields if f.metadata.get(COLUMN_ID) is not None]
    used += [nested_mapping.max_id(type_value(f.type)) for f in fields if f.nested]
    top = max([int(configuration.get(MAX_COLUMN_ID, 0))] + used)
    out = []
    name_mode = mapping_mode(configuration) == "name"
    for f in fields:
        # A new column has no physical name yet; a column of a table that just turned mapping
        # on has its name as its physical name (check_mode_change) and no id yet.
        new = f.metadata.get(PHYSICAL_NAME) is None
        if new or f.metadata.get(COLUMN_ID) is None:  # a column's id before its nested fields' (Delta's order)
            meta = dict(f.metadata)
            if meta.get(COLUMN_ID) is None:
                top += 1
                meta[COLUMN_ID] = top
            meta.setdefault(PHYSICAL_NAME, f"col-{uuid.uuid4()}")
            f = f.model_copy(update={"metadata": meta})
        if f.nested:  # nested fields: Delta's names and ids in a new column (spec/nested_mapping.py)
            inner, top = nested_mapping.assign(type_value(f.type), top, new, ids=name_mode)
            if inner != type_value(f.type):
                f = f.model_copy(update={"type": type_text(inner)})
        out.append(f)
    conf = dict(configuration)
    conf[MAX_COLUMN_ID] = str(top)
    return tuple(out), conf


def table_schema(metadata) -> pa.Schema:
    """The :func:`file_schema` of a table's ``Metadata``: what every reader of its files
    passes to ``format/datafiles.py``."""
    return file_schema(metadata.schema_, metadata.configuration)


def with_mapping(schema: pa.Schema, mapped: pa.Schema) -> pa.Schema:
    """``schema`` (columns of the table, e.g. those Spark asks for, typed its way) with the
    mapping metadata ``mapped`` (the table's :func:`file_schema`) holds for each column."""
    out = []
    for f in schema:
        at = mapped.get_field_index(f.name)
        out.append(f.with_metadata(mapped.field(at).metadata) if at >= 0 and mapped.field(at).metadata else f)
    return pa.schema(out)


def evolve(metadata, fields=None):
    """``metadata`` (a ``Metadata``) with the schema ``fields`` (its own when None), every
    column of a column-mapped table given a physical name and an id (:func:`assign`), and
    ``delta.columnMapping.maxColumnId`` raised to match: what every commit of a new schema
    writes, before any file is written with it."""
    assigned, conf = assign(tuple(metadata.schema_ if fields is None else fields), metadata.configuration)
    if not is_mapped(metadata.configuration):
        return metadata if fields is None else metadata.model_copy(update={"schema_": assigned})
    return metadata.model_copy(update={"schema_": assigned, "configuration": conf})


def check_mode_change(old: Mapping[str, str], new: Mapping[str, str], fields) -> tuple:
    """The fields of a table whose properties change from ``old`` to ``new``: unchanged
    unless column mapping is turned on, from ``none`` to ``name`` (Delta's one allowed
    change: each column's physical name is then its current name, which its files use).
    Any other change of the mode, or a ``maxColumnId`` set by hand, is refused."""
    from ..errors import InvalidOptionError

    before, after = mapping_mode(old), mapping_mode(new)
    if after not in ("none", "name", "id"):
        raise InvalidOptionError(f"{MODE} must be none, name or id, not {new.get(MODE)!r}")
    if new.get(MAX_COLUMN_ID) != old.get(MAX_COLUMN_ID) and before == after:
        raise InvalidOptionError(f"{MAX_COLUMN_ID} is kept by the writer; it cannot be set")
    if before == after:
        return tuple(fields)
    if before != "none" or after != "name":
        raise InvalidOptionError(
            f"{MODE} cannot change from {before} to {after} on an existing table (Delta allows none to name "
            "only: the files keep their columns' names); rewrite the table into a new one with the mode set")
    return tuple(f.model_copy(update={"metadata": {**f.metadata, PHYSICAL_NAME: f.name}})
                 if f.metadata.get(PHYSICAL_NAME) is None else f for f in fields)
