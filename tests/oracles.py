"""The engines nobody here wrote, as the tests load them: DuckDB's delta extension
(delta-kernel-rs) reading a table's log. One place to load it, so every test reads the same way."""

from __future__ import annotations

import glob
import os

import duckdb
import duckdb_extension_delta


def duckdb_delta() -> duckdb.DuckDBPyConnection:
    """A DuckDB connection with the delta extension loaded from the ``duckdb-extension-delta``
    package's file (no download): ``con.execute(f"SELECT * FROM delta_scan('{path}')")``."""
    ext = glob.glob(os.path.join(os.path.dirname(duckdb_extension_delta.__file__), "extensions", "*",
                                 "delta.duckdb_extension"))
    assert ext, "the duckdb-extension-delta package holds no extension file"
    con = duckdb.connect(config={"allow_unsigned_extensions": "true", "autoinstall_known_extensions": "false"})
    con.execute(f"LOAD '{ext[0]}'")
    return con
