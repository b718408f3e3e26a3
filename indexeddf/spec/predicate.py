"""SQL predicate strings (Spark syntax): key constraints for index planning, and an
equivalent ``pyarrow.dataset`` expression for scans.

Parsing is sqlglot's (Spark dialect); this module only maps the parsed tree. A
predicate is split into top-level AND conjuncts (the whole predicate's Arrow
expression comes from :mod:`.expressions`); ``col = lit``, ``col <=> lit``,
``col IN (lits)``, ``col IS NULL`` and an OR of those on one column become key
constraints (of two on one column, the one with fewer values), everything else is kept as
residual text that a scan evaluates.
"""

from __future__ import annotations

import datetime as dt
import decimal
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from ..errors import InvalidOptionError, SchemaMismatchError
from .expressions import compile_tree, parse_guarded, require_boolean


@dataclass(frozen=True)
class KeyConstraint:
    """``column`` equals one of ``values`` (``None`` in values: the key is NULL)."""

    column: str
    values: tuple
    text: str


@dataclass
class Predicate:
    """A parsed predicate: its key constraints, the other conjuncts, and the whole
    predicate as an Arrow expression."""

    text: str
    keys: dict[str, KeyConstraint] = field(default_factory=dict)
    residual: list[str] = field(default_factory=list)
    expression: pc.Expression | None = None


def parse_predicate(text: str, schema: pa.Schema) -> Predicate:
    """Parse ``text`` against ``schema``.

    Anything it cannot take raises ``InvalidOptionError`` (or ``SchemaMismatchError``
    for a column the table lacks) with the reason: never a parser's own exception. The
    guards (length, nesting, the parser's errors) are the expression compiler's.
    """
    return parse_guarded(text, "predicate", lambda tree: _parse(tree, text, schema))


def _parse(tree: exp.Expression, text: str, schema: pa.Schema) -> Predicate:
    # One translator in the project: the scan expression is the general compiler's.
    columns = dict(zip(schema.names, schema.types))
    compiled = compile_tree(tree, columns, text, context="predicate")
    pred = Predicate(text, expression=require_boolean(compiled, "predicate").expression)
    for conjunct in _conjuncts(tree):
        constraint = _key_constraint(conjunct, schema)
        held = None if constraint is None else pred.keys.get(constraint.column)
        if constraint is None or held is not None and len(held.values) <= len(constraint.values):
            pred.residual.append(conjunct.sql(dialect="spark"))
        else:
            # Two constraints on one column: either holds every match (the other is checked
            # on the rows read), so the one with fewer keys is looked up.
            if held is not None:
                pred.residual.append(held.text)
            pred.keys[constraint.column] = constraint
    return pred


def _conjuncts(tree: exp.Expression) -> list[exp.Expression]:
    tree = tree.unnest()
    if isinstance(tree, exp.And):
        return _conjuncts(tree.this) + _conjuncts(tree.expression)
    return [tree]


def _column(node: exp.Expression, schema: pa.Schema) -> str | None:
    node = node.unnest()
    if isinstance(node, exp.Column):
        if len(node.parts) > 1:  # a field inside a struct column (no key), or a column named "a.b"
            whole = ".".join(p.name for p in node.parts)
            return whole if whole in schema.names else None
        name = node.name
        if name not in schema.names:
            raise SchemaMismatchError(f"predicate names column {name!r}, which the table lacks ({schema.names})", [name])
        return name
    return None


def _key_constraint(node: exp.Expression, schema: pa.Schema) -> KeyConstraint | None:
    text = node.sql(dialect="spark")
    if isinstance(node, (exp.EQ, exp.NullSafeEQ)):
        for col_side, lit_side in ((node.this, node.expression), (node.expression, node.this)):
            col = _column(col_side, schema)
            if col is not None and _is_literal(lit_side):
                value = _literal(lit_side)
                if value is None and isinstance(node, exp.EQ):
                    return None  # col = NULL is never true; leave it to the scan
                return KeyConstraint(col, (value,), text)
        return None
    if isinstance(node, exp.In) and not node.args.get("query"):
        col = _column(node.this, schema)
        if col is not None and all(_is_literal(e) for e in node.expressions):
            # NULL in an IN list never matches.
            values = tuple(v for v in (_literal(e) for e in node.expressions) if v is not None)
            return KeyConstraint(col, values, text)
        return None
    if isinstance(node, exp.Or):
        left = _key_constraint(node.this.unnest(), schema)
        right = _key_constraint(node.expression.unnest(), schema)
        if left is None or right is None or left.column != right.column:
            return None
        return KeyConstraint(left.column, left.values + right.values, text)
    if isinstance(node, exp.Is) and isinstance(node.expression, exp.Null):
        col = _column(node.this, schema)
        return KeyConstraint(col, (None,), text) if col is not None else None
    return None


def _is_literal(node: exp.Expression) -> bool:
    node = node.unnest()
    if isinstance(node, (exp.Literal, exp.Null, exp.Boolean)):
        return True
    if isinstance(node, exp.Neg):
        return _is_literal(node.this)
    if isinstance(node, exp.Cast):
        return isinstance(node.this, exp.Literal)
    return False


def _literal(node: exp.Expression) -> Any:
    node = node.unnest()
    if isinstance(node, exp.Null):
        return None
    if isinstance(node, exp.Boolean):
        return node.this
    if isinstance(node, exp.Neg):
        return -_literal(node.this)
    if isinstance(node, exp.Cast):
        raw = node.this.this
        kind = node.to.this
        if kind == exp.DataType.Type.DATE:
            return dt.date.fromisoformat(raw)
        if kind in (exp.DataType.Type.TIMESTAMP, exp.DataType.Type.TIMESTAMPTZ, exp.DataType.Type.TIMESTAMPNTZ):
            value = dt.datetime.fromisoformat(raw.replace("Z", "+00:00"))
            if kind != exp.DataType.Type.TIMESTAMPNTZ and value.tzinfo is None:
                value = value.replace(tzinfo=dt.timezone.utc)  # the session time zone is UTC
            return value
        raise InvalidOptionError(f"unsupported typed literal {node.sql(dialect='spark')}")
    if node.is_string:
        return node.this
    raw = node.this
    if "." in raw or "e" in raw.lower():
        try:
            return decimal.Decimal(raw) if "e" not in raw.lower() else float(raw)
        except decimal.InvalidOperation:
            return float(raw)
    return int(raw)


def literal_for(value: Any, t: pa.DataType) -> pa.Scalar:
    """``value`` as a scalar of the column type ``t`` (as Spark would coerce it)."""
    if isinstance(value, decimal.Decimal) and pa.types.is_floating(t):
        value = float(value)
    try:
        return pa.scalar(value).cast(t) if not isinstance(value, str) or pa.types.is_string(t) else pa.scalar(value, pa.string()).cast(t)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
        raise SchemaMismatchError(f"literal {value!r} does not fit a column of type {t}: {e}", []) from None
