"""Delta's CHECK constraints (PROTOCOL.md "Check Constraints", Delta's protocol): a table property
``delta.constraints.<name>`` whose value is a SQL condition every row of the table must make
true; a row for which it is false or NULL is refused. A table with one needs the writer feature
``checkConstraints`` (writer version 3, or the feature listed at writer version 7).

This module reads a table's constraints from its configuration, gives the protocol that holds
them, and checks Arrow rows against them with the project's expression translator
(:mod:`.expressions`). A constraint the translator cannot evaluate makes a Python-only write
refuse with :class:`ConstraintNotEvaluableError` (Spark evaluates it with Catalyst instead:
the connector's writes and changes). Messages follow Delta's error classes. Nothing here does
I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import ConstraintNotEvaluableError, ConstraintViolationError, IndexedDFError
from .actions import Protocol
from .config import CHECKED_OPTION  # noqa: F401 - the option is part of what constraints are

if TYPE_CHECKING:  # compiled only for a table with constraints: the SQL parser loads then
    from .expressions import CompiledExpression

PREFIX = "delta.constraints."
"""Configuration key prefix of a CHECK constraint: ``delta.constraints.<name>`` = its SQL."""
FEATURE = "checkConstraints"
"""Delta's writer feature for CHECK constraints (implied by writer version 3)."""
LEGACY_WRITER_VERSION = 3
"""The legacy writer version that implies :data:`FEATURE`."""
VIOLATION = "DELTA_VIOLATE_CONSTRAINT_WITH_VALUES"
"""Delta's error class of a written row that breaks a CHECK constraint."""
NEW_VIOLATION = "DELTA_NEW_CHECK_CONSTRAINT_VIOLATION"
"""Delta's error class of ``ADD CONSTRAINT`` on a table whose rows break it."""


def key(name: str) -> str:
    """The configuration key of constraint ``name``: Delta stores names in lower case."""
    return PREFIX + name.lower()


def constraints(configuration: Mapping[str, str]) -> dict[str, str]:
    """The table's CHECK constraints, name -> SQL, in configuration order (names as stored:
    Delta stores them in lower case, delta-rs as given)."""
    return {k[len(PREFIX):]: v for k, v in configuration.items() if k.startswith(PREFIX)}


def stored_key(configuration: Mapping[str, str], name: str) -> str | None:
    """The configuration key of constraint ``name`` (names compare without case), or None."""
    lower = PREFIX + name.lower()
    return next((k for k in configuration if k.lower() == lower), None)


def check_name(name) -> str:
    """A constraint name as Delta takes it (a non-empty identifier-like string), lower-cased."""
    from ..errors import InvalidOptionError

    if not isinstance(name, str) or not name.strip() or any(c in name for c in "`.\n"):
        raise InvalidOptionError(f"constraint name {name!r}: give a non-empty name without backticks, dots or "
                                 "line breaks, such as 'positive_amount'")
    return name.strip().lower()


def with_constraints_feature(p: Protocol) -> Protocol:
    """``p`` able to hold CHECK constraints, as Delta and delta-rs upgrade it: writer version 3
    on a legacy protocol, the feature ``checkConstraints`` added at writer version 7; ``p``
    itself when it already can."""
    if p.minWriterVersion >= 7:
        if FEATURE in (p.writerFeatures or ()):
            return p
        return p.model_copy(update={"writerFeatures": tuple(sorted({*(p.writerFeatures or ()), FEATURE}))})
    if p.minWriterVersion >= LEGACY_WRITER_VERSION:
        return p
    return p.model_copy(update={"minWriterVersion": LEGACY_WRITER_VERSION})


def violation_message(name: str, expression: str, values: Mapping[str, object]) -> str:
    """Delta's ``DELTA_VIOLATE_CONSTRAINT_WITH_VALUES`` message for one row."""
    shown = "".join(f"\n - {c} : {_value(v)}" for c, v in values.items())
    return f"[{VIOLATION}] CHECK constraint {name} ({expression}) violated by row with values:" + shown


def new_violation_message(rows: int, table: str, expression: str) -> str:
    """Delta's ``DELTA_NEW_CHECK_CONSTRAINT_VIOLATION`` message (``ADD CONSTRAINT`` on rows that break it)."""
    return f"[{NEW_VIOLATION}] {rows} rows in {table} violate the new CHECK constraint ({expression}). Fix or " \
        "delete those rows, then add the constraint again."


def _value(v: object) -> str:
    return "null" if v is None else str(v)


@dataclass(frozen=True)
class Constraint:
    """One CHECK constraint compiled against a table's columns."""

    name: str
    text: str
    condition: CompiledExpression

    def violations(self, rows: pa.Table) -> pa.ChunkedArray:
        """True for each row that breaks the constraint (its condition false or NULL)."""
        return pc.invert(pc.fill_null(self.condition.evaluate(rows), False))

    def check(self, rows: pa.Table) -> None:
        """Raise :class:`ConstraintViolationError` naming the first row that breaks it."""
        if rows.num_rows == 0:
            return
        bad = self.violations(rows)
        if not pc.any(bad).as_py():
            return
        row = rows.filter(bad).slice(0, 1).select(sorted(self.condition.columns_used)).to_pylist()
        values = row[0] if row else {}
        raise ConstraintViolationError(violation_message(self.name, self.text, values), self.name, self.text, values)


def compile_constraint(name: str, text: str, schema: pa.Schema) -> Constraint:
    """Compile ``text`` against ``schema``; :class:`ConstraintNotEvaluableError` when the Python
    expressions cannot evaluate it (a column the table lacks is ``SchemaMismatchError``)."""
    from ..errors import SchemaMismatchError
    from .expressions import compile_predicate

    columns = dict(zip(schema.names, schema.types))
    try:
        return Constraint(name, text, compile_predicate(text, columns, context=f"CHECK constraint {name}"))
    except SchemaMismatchError:
        raise
    except IndexedDFError as e:
        raise ConstraintNotEvaluableError(
            f"CHECK constraint {name} ({text}) cannot be evaluated without Spark ({e}); write to this table "
            "through Spark (df.write.format(\"indexeddf\"), INSERT, MERGE), which evaluates every constraint "
            "with Catalyst, or drop the constraint") from None


class ConstraintChecker:
    """The CHECK constraints of a table, to check rows written to it.

    Built from the table's configuration and (logical) schema; ``skip`` names constraints
    already checked elsewhere (Spark's plan evaluated them with Catalyst: the value is the
    SQL it checked, so a constraint replaced meanwhile is checked again here). Compiling is
    deferred to the first check, so a table whose constraints only Spark can evaluate still
    opens.
    """

    def __init__(self, configuration: Mapping[str, str], schema: pa.Schema,
                 skip: Mapping[str, str] | None = None):
        done = {k.lower(): v for k, v in (skip or {}).items()}
        self.pending = {n: t for n, t in constraints(configuration).items() if done.get(n.lower()) != t}
        self.schema = schema
        self._compiled: list[Constraint] | None = None

    def __bool__(self) -> bool:
        return bool(self.pending)

    def compiled(self) -> list[Constraint]:
        """Every pending constraint compiled (typed errors as :func:`compile_constraint`)."""
        if self._compiled is None:
            self._compiled = [compile_constraint(n, t, self.schema) for n, t in self.pending.items()]
        return self._compiled

    def check(self, rows: pa.Table) -> None:
        """Raise :class:`ConstraintViolationError` when a row breaks a constraint (the first
        constraint in configuration order, its first such row)."""
        if not self.pending or rows.num_rows == 0:
            return
        for c in self.compiled():
            c.check(rows)


def checker_for(metadata, skip: Mapping[str, str] | None = None) -> ConstraintChecker:
    """The :class:`ConstraintChecker` of a table's ``metadata`` (its logical Arrow schema)."""
    from .schema import arrow_schema

    return ConstraintChecker(metadata.configuration, arrow_schema(metadata.schema_), skip)
