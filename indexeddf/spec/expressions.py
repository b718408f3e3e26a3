"""SQL expressions (Spark syntax) compiled into ``pyarrow.compute`` expressions.

The change engine (MERGE / UPDATE / DELETE) takes predicates and update expressions
as SQL strings, as delta-rs's ``TableMerger`` does. sqlglot parses them (Spark
dialect: Delta users write Spark SQL); this module resolves the column references
and maps the tree onto Arrow compute functions, following Spark's semantics where
Arrow's differ (1-based ``substring``, ``/`` always a double division, ``%`` with the
sign of the dividend, ``round`` half away from zero, ``floor``/``ceil`` giving bigint).

Column naming for merges: the engine joins target and source rows into one Arrow
table whose columns are ``"<alias>.<column>"`` (``merge_columns`` builds the mapping)
and passes ``aliases={alias: alias + "."}``; ``t.k`` then resolves to column ``t.k``
and an unqualified ``k`` to the single column named ``k`` with or without an alias
prefix (two candidates: ``AmbiguousColumnError``).

Where this deliberately differs from Spark (documented in ``SEMANTICS``): division
and modulo by zero give NULL (Spark's non-ANSI result; Spark 4's default ANSI mode
raises), ``/`` on decimals gives a double, integer overflow and invalid casts raise
(Spark 4's ANSI behaviour), NaN = NaN is false, regular expressions are RE2's.
"""

from __future__ import annotations

import datetime as dt
import decimal
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Callable

import pyarrow as pa
import pyarrow.compute as pc
import sqlglot
from sqlglot import exp

from ..errors import AmbiguousColumnError, IndexedDFError, InvalidOptionError, SchemaMismatchError

__all__ = [
    "CompiledExpression", "JoinCondition", "compile_expression", "compile_predicate", "compile_tree",
    "equality_keys", "merge_columns", "parse_guarded", "require_boolean", "SUPPORTED_FUNCTIONS", "SEMANTICS",
]

SEMANTICS = """\
Known differences from Spark (spark.sql.ansi.enabled as noted):
- x / 0, x % 0 and x div 0 give NULL (Spark non-ANSI; Spark 4's ANSI default raises).
- '/' on decimals gives a double (Spark keeps a decimal).
- integer overflow and casts of invalid strings raise InvalidOptionError (Spark ANSI).
- NaN = NaN is false (Spark: true); float % float uses Arrow's floating remainder.
- RLIKE uses RE2 syntax (Spark: java.util.regex); LIKE ... ESCAPE takes one character.
- CAST(double AS string) prints 1.0 as "1"; CAST(timestamp AS string) adds "Z".
- round(decimal, d) with d < 0 is not supported; `div` takes integers only (Spark: decimals too).
- substring's position and length, LIKE / RLIKE patterns and trim characters must be literals.
- decimal + - * past 38 digits: the scale shrinks as Spark's (to at least 6); a value that still
  does not fit raises (Spark: NULL, or an error under ANSI).
"""
"""What a user may see differently from Spark (also in the module docstring)."""

MAX_EXPRESSION_CHARS = 1_000_000
"""Longer expression strings are refused before parsing."""
PARSE_RECURSION_LIMIT = 10_000
"""Python's recursion limit while an expression is parsed and compiled (restored afterwards)."""

_NULL = pa.null()
_BOOL = pa.bool_()
_F64 = pa.float64()
_UTC = pa.timestamp("us", tz="UTC")


@dataclass(frozen=True)
class CompiledExpression:
    """A SQL expression ready to run on Arrow tables.

    ``expression`` is the ``pyarrow.compute.Expression`` (its field references are
    the input column names), ``columns_used`` the input columns it reads, and
    ``result_type`` the Arrow type of its result.
    """

    text: str
    expression: pc.Expression
    result_type: pa.DataType
    columns_used: frozenset[str]

    def evaluate(self, table: pa.Table) -> pa.ChunkedArray:
        """The expression's value for every row of ``table`` (NULL where SQL gives NULL).

        Errors of the data (an integer overflow, a string that does not cast) raise
        ``InvalidOptionError`` naming the expression.
        """
        import pyarrow.dataset as ds

        missing = self.columns_used - set(table.column_names)
        if missing:
            raise SchemaMismatchError(f"expression `{_shown(self.text)}` reads columns {sorted(missing)}, "
                                      f"which the table lacks ({table.column_names})", sorted(missing))
        try:
            out = ds.dataset(table.select(sorted(self.columns_used))).to_table(columns={"out": self.expression})
        except pa.ArrowException as e:
            raise InvalidOptionError(f"cannot evaluate `{_shown(self.text)}`: {_first_line(e)}") from None
        column = out.column("out")
        if len(column) != table.num_rows:  # a table with no used columns: a constant per row
            column = pa.chunked_array([pa.repeat(column[0] if len(column) else pa.scalar(None, self.result_type),
                                                 table.num_rows)], self.result_type)
        return column if column.type == self.result_type else column.cast(self.result_type)


@dataclass(frozen=True)
class JoinCondition:
    """A merge ON condition split for the engine.

    ``keys``: (target column, source column) pairs, names without alias prefixes,
    from conjuncts ``t.a = s.b``; the engine probes the index / joins on them.
    ``residual``: the other conjuncts as one compiled predicate over the joined
    columns (None when every conjunct was a key pair).
    """

    keys: list[tuple[str, str]]
    residual: CompiledExpression | None
    residual_text: str | None = None


def merge_columns(target: pa.Schema, source: pa.Schema, target_alias: str | None = None,
                  source_alias: str | None = None) -> tuple[dict[str, pa.DataType], dict[str, str]]:
    """The column naming of a merge's joined table: ``({"t.k": int64, "s.k": ...}, {"t": "t.", "s": "s."})``.

    The first value maps every joined column (``"<alias>.<name>"``) to its type, the
    second is the ``aliases`` argument of ``compile_expression``. Without aliases the
    qualifiers are ``target`` and ``source``.
    """
    t_alias, s_alias = target_alias or "target", source_alias or "source"
    if t_alias.lower() == s_alias.lower():
        raise InvalidOptionError(f"source_alias and target_alias are both {t_alias!r}: give them different names")
    columns = {f"{t_alias}.{f.name}": f.type for f in target}
    columns.update({f"{s_alias}.{f.name}": f.type for f in source})
    return columns, {t_alias: f"{t_alias}.", s_alias: f"{s_alias}."}


def compile_expression(text: str, columns: Mapping[str, pa.DataType], *, aliases: Mapping[str, str] | None = None,
                       context: str = "expression") -> CompiledExpression:
    """Parse ``text`` (Spark SQL) and compile it against the input ``columns``.

    ``aliases`` maps a qualifier (``t``, ``s``, a table name) to the prefix of its
    columns' names. ``context`` names the expression in messages ("predicate",
    "update of column v"). Unsupported constructs raise ``InvalidOptionError``,
    unknown columns ``SchemaMismatchError``, ambiguous ones ``AmbiguousColumnError``.
    """
    return parse_guarded(text, context, lambda tree: compile_tree(tree, columns, text, aliases=aliases, context=context))


def compile_predicate(text: str, columns: Mapping[str, pa.DataType], *, aliases: Mapping[str, str] | None = None,
                      context: str = "predicate") -> CompiledExpression:
    """``compile_expression`` for a condition: its result must be boolean (or NULL)."""
    compiled = compile_expression(text, columns, aliases=aliases, context=context)
    return require_boolean(compiled, context)


def compile_tree(tree: exp.Expression, columns: Mapping[str, pa.DataType], text: str, *,
                 aliases: Mapping[str, str] | None = None, context: str = "expression") -> CompiledExpression:
    """Compile an already parsed sqlglot tree (``text``: its source, for messages)."""
    compiler = _Compiler(text, context, _Resolver(columns, aliases or {}, text, context))
    typed = compiler.compile(tree)
    return CompiledExpression(text, typed.expr, typed.type, frozenset(compiler.resolver.used))


def equality_keys(text: str, columns: Mapping[str, pa.DataType], *, aliases: Mapping[str, str],
                  target_prefix: str, source_prefix: str) -> JoinCondition:
    """Split a merge ON condition into key pairs ``t.a = s.b`` and the residual rest.

    Only top-level AND conjuncts that compare one target column with one source
    column by ``=`` are keys, and only when the two types join without a cast (equal
    types, two integer types or two string types); anything else stays residual.
    """
    def split(tree: exp.Expression) -> JoinCondition:
        resolver = _Resolver(columns, aliases, text, "merge condition")
        compile_tree(tree, columns, text, aliases=aliases, context="merge condition")  # validates the whole
        keys, rest, seen = [], [], set()
        for conjunct in _conjuncts(tree):
            pair = _key_pair(conjunct, resolver, columns, target_prefix, source_prefix)
            if pair is None or pair[0] in seen:
                rest.append(conjunct)
            else:
                seen.add(pair[0])
                keys.append(pair)
        if not rest:
            return JoinCondition(keys, None)
        residual_tree = rest[0]
        for conjunct in rest[1:]:
            residual_tree = exp.and_(residual_tree, conjunct)
        residual_text = residual_tree.sql(dialect="spark")
        residual = compile_tree(residual_tree, columns, residual_text, aliases=aliases, context="merge condition")
        return JoinCondition(keys, require_boolean(residual, "merge condition"), residual_text)

    return parse_guarded(text, "merge condition", split)


def _key_pair(node, resolver, columns, target_prefix, source_prefix) -> tuple[str, str] | None:
    if not isinstance(node, exp.EQ):
        return None
    left, right = node.this.unnest(), node.expression.unnest()
    if not (isinstance(left, exp.Column) and isinstance(right, exp.Column)):
        return None
    a, b = resolver.resolve(left), resolver.resolve(right)
    if a.startswith(source_prefix) and b.startswith(target_prefix):
        a, b = b, a
    if not (a.startswith(target_prefix) and b.startswith(source_prefix)):
        return None
    ta, tb = columns[a], columns[b]
    joinable = ta == tb or (pa.types.is_integer(ta) and pa.types.is_integer(tb)) or (_is_string(ta) and _is_string(tb))
    return (a[len(target_prefix):], b[len(source_prefix):]) if joinable else None


def _conjuncts(tree: exp.Expression) -> list[exp.Expression]:
    tree = tree.unnest()
    if isinstance(tree, exp.And):
        return _conjuncts(tree.this) + _conjuncts(tree.expression)
    return [tree]


def require_boolean(compiled: CompiledExpression, context: str) -> CompiledExpression:
    """``compiled`` if it is a condition (a bare NULL becomes a boolean NULL), else ``InvalidOptionError``."""
    if compiled.result_type == _BOOL:
        return compiled
    if compiled.result_type == _NULL:  # a bare NULL condition: never true
        return CompiledExpression(compiled.text, compiled.expression.cast(_BOOL), _BOOL, compiled.columns_used)
    raise InvalidOptionError(f"{context} `{_shown(compiled.text)}` gives {compiled.result_type}, not a boolean: "
                             "write a condition such as \"v > 0\"")


def parse_guarded(text: Any, context: str, then: Callable[[exp.Expression], Any]) -> Any:
    """Parse ``text`` (Spark SQL) and run ``then`` on the tree; any failure becomes a typed
    error naming ``context`` ("predicate", "merge condition", ...): a text too long, nested
    too deeply, that does not parse, or whose values do not fit."""
    if not isinstance(text, str):
        raise InvalidOptionError(f"a {context} is a SQL string, got {type(text).__name__}")
    if len(text) > MAX_EXPRESSION_CHARS:
        raise InvalidOptionError(f"{context} of {len(text)} characters; at most {MAX_EXPRESSION_CHARS}")
    limit = sys.getrecursionlimit()
    try:
        # sqlglot descends about 20 Python frames per level of parentheses: the default
        # limit would stop near 40 levels. Python-to-Python calls use no C stack on
        # CPython 3.11+ (on 3.10 a few MiB at this limit, within a thread's 8 MiB), so a
        # higher limit for the parse is safe; past it (some 500 levels) it is refused.
        sys.setrecursionlimit(max(limit, PARSE_RECURSION_LIMIT))
        tree = sqlglot.parse_one(text, read="spark")
        if tree is None:
            raise InvalidOptionError(f"an empty {context}: give an expression such as \"v + 1\"")
        return then(tree)
    except IndexedDFError:
        raise
    except RecursionError:
        raise InvalidOptionError(f"{context} `{_shown(text)}` is nested too deeply; write it with fewer parentheses") from None
    except sqlglot.errors.SqlglotError as e:
        raise InvalidOptionError(f"cannot parse {context} `{_shown(text)}`: {_first_line(e)}") from None
    except (ValueError, ArithmeticError, TypeError, pa.ArrowException) as e:
        raise InvalidOptionError(f"cannot use {context} `{_shown(text)}`: {_first_line(e)}") from None
    finally:
        sys.setrecursionlimit(limit)


def _shown(text: str) -> str:
    return text if len(text) <= 200 else text[:200] + "..."


def _first_line(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0][:300]


class _Resolver:
    """Column references to input column names (records the ones used)."""

    def __init__(self, columns: Mapping[str, pa.DataType], aliases: Mapping[str, str], text: str, context: str):
        self.columns, self.text, self.context = columns, text, context
        self.aliases = {k.lower(): v for k, v in aliases.items()}
        self.used: set[str] = set()
        prefixes = set(self.aliases.values())
        # An unqualified name matches a column's name stripped of its alias prefix
        # (or the whole name of an unprefixed column); Spark compares names ignoring case.
        self.bare: dict[str, list[str]] = {}
        for name in columns:
            stripped = next((name[len(p):] for p in prefixes if p and name.startswith(p)), name)
            self.bare.setdefault(stripped.lower(), []).append(name)

    def resolve(self, node: exp.Column) -> str:
        """The input column that ``node`` names."""
        if isinstance(node.this, exp.Star):
            raise self.unsupported(node, "* is not an expression")
        name = node.name
        qualifier = ".".join(p.name for p in node.parts[:-1])
        found = self._qualified(qualifier, name, node) if qualifier else self._unqualified(name, node)
        self.used.add(found)
        return found

    def _qualified(self, qualifier: str, name: str, node: exp.Column) -> str:
        prefix = self.aliases.get(qualifier.lower())
        if prefix is None:
            whole = f"{qualifier}.{name}"  # a column literally named "t.k" (no aliases given)
            match = self._match([c for c in self.columns if c.lower() == whole.lower()], whole, node)
            if match:
                return match
            raise SchemaMismatchError(
                f"{self.context} `{_shown(self.text)}` names `{node.sql(dialect='spark')}`, but there is no table or "
                f"alias {qualifier!r} (known: {sorted(self.aliases) or 'none'}; columns: {list(self.columns)})", [whole])
        wanted = (prefix + name).lower()
        match = self._match([c for c in self.columns if c.lower() == wanted], prefix + name, node)
        if match:
            return match
        available = [c[len(prefix):] for c in self.columns if c.startswith(prefix)]
        raise SchemaMismatchError(f"{self.context} `{_shown(self.text)}` names column {name!r} of {qualifier!r}, "
                                  f"which it lacks (its columns: {available})", [name])

    def struct_field(self, node: exp.Column) -> tuple[str, list[str], pa.DataType] | None:
        """``node`` as a field inside a struct column (``s.a``, ``t.s.inner.x``): the column,
        the field names down to it (as the struct spells them; Spark matches them ignoring
        case) and its type; None when no prefix of its parts is a struct column that has them."""
        parts = [p.name for p in node.parts]
        for k in range(len(parts) - 1, 0, -1):
            head, rest = parts[:k], parts[k:]
            try:
                name = self._qualified(".".join(head[:-1]), head[-1], node) if len(head) > 1 \
                    else self._unqualified(head[0], node)
            except SchemaMismatchError:
                continue
            t, path = self.columns[name], []
            for part in rest:
                if not pa.types.is_struct(t):
                    break
                match = [f for f in t if f.name.lower() == part.lower()]
                if len(match) != 1:
                    break
                path.append(match[0].name)
                t = match[0].type
            else:
                self.used.add(name)
                return name, path, t
        return None

    def _unqualified(self, name: str, node: exp.Column) -> str:
        match = self._match(self.bare.get(name.lower(), []), name, node)
        if match:
            return match
        raise SchemaMismatchError(f"{self.context} `{_shown(self.text)}` names column {name!r}, which the input lacks "
                                  f"(columns: {list(self.columns)})", [name])

    def _match(self, candidates: list[str], name: str, node: exp.Column) -> str | None:
        if len(candidates) > 1:
            exact = [c for c in candidates if c == name or c.endswith("." + name)]
            if len(exact) == 1 and len({c.lower() for c in candidates}) == 1:
                return exact[0]
            raise AmbiguousColumnError(
                f"{self.context} `{_shown(self.text)}`: column `{node.sql(dialect='spark')}` is ambiguous, it could be "
                f"any of {candidates}; qualify it (e.g. `{candidates[0].rsplit('.', 1)[0]}.{name}`)", candidates)
        return candidates[0] if candidates else None

    def unsupported(self, node: exp.Expression, why: str) -> InvalidOptionError:
        """The typed error for a construct this compiler cannot evaluate."""
        return InvalidOptionError(f"cannot evaluate `{_shown(node.sql(dialect='spark'))}` in {self.context} "
                                  f"`{_shown(self.text)}`: {why}")


@dataclass(frozen=True)
class _Typed:
    """A compiled subexpression, its Arrow type and, for constants, its value."""

    expr: pc.Expression
    type: pa.DataType
    scalar: pa.Scalar | None = field(default=None, compare=False)


def _constant(scalar: pa.Scalar) -> _Typed:
    return _Typed(pc.scalar(scalar), scalar.type, scalar)


def _is_string(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t)


def _is_numeric(t: pa.DataType) -> bool:
    return pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)


def _is_temporal(t: pa.DataType) -> bool:
    return pa.types.is_date(t) or pa.types.is_timestamp(t)


_INT_DIGITS = {8: 3, 16: 5, 32: 10, 64: 20}
"""Decimal digits an integer type needs, to compute with decimals exactly (Spark's rule)."""


def _as_decimal(t: pa.DataType) -> pa.DataType:
    if pa.types.is_decimal(t):
        return t
    return pa.decimal128(_INT_DIGITS[t.bit_width], 0)


def _numeric_type(a: pa.DataType, b: pa.DataType) -> pa.DataType:
    """The type two numbers are computed in: double if either floats, else decimal, else the wider integer."""
    if pa.types.is_floating(a) or pa.types.is_floating(b):
        return _F64
    if pa.types.is_decimal(a) or pa.types.is_decimal(b):
        da, db = _as_decimal(a), _as_decimal(b)
        scale = max(da.scale, db.scale)
        digits = max(da.precision - da.scale, db.precision - db.scale)
        return pa.decimal128(min(38, digits + scale), scale)
    if a.bit_width != b.bit_width:
        return a if a.bit_width > b.bit_width else b
    return a if pa.types.is_signed_integer(a) else b


def _compare_type(a: pa.DataType, b: pa.DataType) -> pa.DataType | None:
    """The type two values are compared in (Spark coerces a string to the other side's type)."""
    if a == b or b == _NULL:
        return a
    if a == _NULL:
        return b
    if _is_numeric(a) and _is_numeric(b):
        return _numeric_type(a, b)
    if _is_string(a) and _is_string(b):
        return pa.large_string()
    if _is_temporal(a) and _is_temporal(b):
        return _UTC if (pa.types.is_timestamp(a) or pa.types.is_timestamp(b)) else pa.date32()
    if _is_string(a) and (_is_numeric(b) or _is_temporal(b) or b == _BOOL):
        return b
    if _is_string(b) and (_is_numeric(a) or _is_temporal(a) or a == _BOOL):
        return a
    return None


def _value_type(a: pa.DataType, b: pa.DataType) -> pa.DataType | None:
    """The type of a value that is either (CASE, COALESCE, IF): a string absorbs the other side."""
    if (_is_string(a) and b not in (_NULL,) and not _is_string(b)) or (_is_string(b) and a != _NULL and not _is_string(a)):
        return pa.string()
    return _compare_type(a, b)


_TYPE_NAMES = {
    exp.DataType.Type.BOOLEAN: _BOOL, exp.DataType.Type.TINYINT: pa.int8(), exp.DataType.Type.SMALLINT: pa.int16(),
    exp.DataType.Type.INT: pa.int32(), exp.DataType.Type.BIGINT: pa.int64(), exp.DataType.Type.FLOAT: pa.float32(),
    exp.DataType.Type.DOUBLE: _F64, exp.DataType.Type.TEXT: pa.string(), exp.DataType.Type.VARCHAR: pa.string(),
    exp.DataType.Type.CHAR: pa.string(), exp.DataType.Type.DATE: pa.date32(), exp.DataType.Type.TIMESTAMP: _UTC,
    exp.DataType.Type.TIMESTAMPTZ: _UTC, exp.DataType.Type.TIMESTAMPLTZ: _UTC,
    exp.DataType.Type.TIMESTAMPNTZ: pa.timestamp("us"), exp.DataType.Type.BINARY: pa.binary(),
}
"""Spark type names (as sqlglot parses them) to Arrow types; TIMESTAMP is UTC, the session time zone."""

SUPPORTED_FUNCTIONS = (
    "abs", "cast", "ceil", "coalesce", "concat", "current_date", "current_timestamp", "day", "dayofmonth", "floor",
    "greatest", "if", "iff", "ifnull", "least", "length", "lower", "ltrim", "month", "nullif", "nvl", "round", "rtrim",
    "substr", "substring", "trim", "try_cast", "upper", "year",
)
"""Function names an expression may call (besides operators, CASE, IN, LIKE, ...)."""

_COMPARISONS = {exp.EQ: "equal", exp.NEQ: "not_equal", exp.LT: "less", exp.LTE: "less_equal",
                exp.GT: "greater", exp.GTE: "greater_equal"}
_ARITHMETIC = {exp.Add: "add_checked", exp.Sub: "subtract_checked", exp.Mul: "multiply_checked"}


class _Compiler:
    """Compiles a sqlglot tree node by node into typed Arrow expressions."""

    def __init__(self, text: str, context: str, resolver: _Resolver):
        self.text, self.context, self.resolver = text, context, resolver
        self.node: exp.Expression | None = None
        self.handlers: dict[type, Callable[[Any], _Typed]] = {
            exp.Paren: lambda n: self.compile(n.this), exp.Column: self._column, exp.Literal: self._literal,
            exp.Null: lambda n: _constant(pa.scalar(None)), exp.Boolean: lambda n: _constant(pa.scalar(bool(n.this))),
            exp.Cast: self._cast_node, exp.TryCast: self._cast_node, exp.Neg: self._neg, exp.Div: self._divide,
            exp.IntDiv: self._int_divide, exp.Mod: self._modulo, exp.And: self._logic, exp.Or: self._logic,
            exp.Not: self._not, exp.NullSafeEQ: self._null_safe_eq, exp.Is: self._is, exp.In: self._in,
            exp.Between: self._between, exp.Like: self._like, exp.ILike: self._like, exp.Escape: self._escape,
            exp.RegexpLike: self._rlike, exp.Case: self._case, exp.If: self._if, exp.Nullif: self._nullif,
            exp.Coalesce: self._coalesce, exp.Abs: lambda n: self._numeric_call("abs_checked", n.this),
            exp.Lower: lambda n: self._string_call("utf8_lower", n.this),
            exp.Upper: lambda n: self._string_call("utf8_upper", n.this), exp.Length: self._length,
            exp.Trim: self._trim, exp.Substring: self._substring, exp.Concat: self._concat, exp.DPipe: self._concat,
            exp.Round: self._round, exp.Floor: lambda n: self._floor_ceil("floor", n),
            exp.Ceil: lambda n: self._floor_ceil("ceil", n), exp.Greatest: lambda n: self._extreme("max", n),
            exp.Least: lambda n: self._extreme("min", n), exp.Year: lambda n: self._date_part("year", n),
            exp.Month: lambda n: self._date_part("month", n), exp.Day: lambda n: self._date_part("day", n),
            exp.DayOfMonth: lambda n: self._date_part("day", n), exp.TsOrDsToDate: self._to_date,
            exp.CurrentDate: lambda n: _constant(pa.scalar(dt.datetime.now(dt.timezone.utc).date(), pa.date32())),
            exp.CurrentTimestamp: lambda n: _constant(pa.scalar(dt.datetime.now(dt.timezone.utc), _UTC)),
            exp.Anonymous: self._anonymous,
        }

    # --- dispatch and helpers --------------------------------------------------------------
    def compile(self, node: exp.Expression) -> _Typed:
        """The typed Arrow expression of ``node``."""
        outer, self.node = self.node, node  # the construct error messages name
        try:
            result = self._dispatch(node)
            if node.args.get("negate") is True and result.type == _BOOL:  # sqlglot's `x NOT LIKE p`
                result = self._call("invert", [result])
            return result
        finally:
            self.node = outer

    def _dispatch(self, node: exp.Expression) -> _Typed:
        handler = next((self.handlers[k] for k in type(node).__mro__ if k in self.handlers), None)
        if handler is not None:
            return handler(node)
        if type(node) in _COMPARISONS:
            return self._compare(_COMPARISONS[type(node)], node.this, node.expression, node)
        if type(node) in _ARITHMETIC:
            return self._arithmetic(_ARITHMETIC[type(node)], node)
        raise self._unsupported(node, self._why_unsupported(node))

    def _why_unsupported(self, node: exp.Expression) -> str:
        if isinstance(node, exp.Func):
            name = node.sql_name().lower() if not isinstance(node, exp.Anonymous) else str(node.this).lower()
            return f"function {name} is not supported; supported: {', '.join(SUPPORTED_FUNCTIONS)}"
        if isinstance(node, (exp.Select, exp.Subquery, exp.Exists)):
            return "subqueries are not supported"
        if isinstance(node, exp.Interval):
            return "INTERVAL is not supported"
        return f"{type(node).__name__} is not supported (see indexeddf.spec.expressions for what is)"

    def _unsupported(self, node: exp.Expression, why: str) -> InvalidOptionError:
        return self.resolver.unsupported(node, why)

    def _call(self, fn: str, args: list[_Typed], options: pc.FunctionOptions | None = None) -> _Typed:
        """Arrow function ``fn`` on ``args``; its result type is Arrow's for those input types."""
        try:
            probe = pc.call_function(fn, [pa.array([], a.type) for a in args], options)
        except (pa.ArrowNotImplementedError, pa.ArrowTypeError, pa.ArrowInvalid) as e:
            types = ", ".join(str(a.type) for a in args)
            raise self._unsupported(self.node, f"{fn} cannot take ({types}): {_first_line(e)}") from None
        return _Typed(pc.Expression._call(fn, [a.expr for a in args], options), probe.type)

    def _cast(self, value: _Typed, target: pa.DataType) -> _Typed:
        """``value`` as ``target`` (constants are cast now, so a bad literal fails at compile time)."""
        if value.type == target:
            return value
        if value.scalar is not None:
            return _constant(self._cast_scalar(value.scalar, target))
        source = value.type
        if (pa.types.is_floating(source) or pa.types.is_decimal(source)) and pa.types.is_integer(target):
            if pa.types.is_decimal(source):  # Arrow's trunc wants room for a carry digit
                value = self._cast(value, pa.decimal128(min(38, source.precision + 1), source.scale))
            value = self._call("trunc", [value])  # Spark truncates toward zero; Arrow's safe cast would refuse
        if _is_string(source) and pa.types.is_timestamp(target) and target.tz:
            parsed = value.expr.cast(pa.timestamp(target.unit))  # the session time zone (UTC) for zone-less text
            return _Typed(parsed.cast(target), target)
        if pa.types.is_timestamp(source) and pa.types.is_date(target):
            return _Typed(value.expr.cast(target, safe=False), target)  # drop the time of day
        if pa.types.is_integer(source) and pa.types.is_decimal(target) and target != _as_decimal(source):
            value = self._checked_cast(value, _as_decimal(source))  # Arrow casts integers only to a wide enough decimal
        if pa.types.is_timestamp(source) and pa.types.is_timestamp(target) and source.tz and not target.tz:
            return _Typed(value.expr.cast(target, safe=False), target)
        return self._checked_cast(value, target)

    def _checked_cast(self, value: _Typed, target: pa.DataType) -> _Typed:
        try:
            pc.cast(pa.array([], value.type), target)
        except (pa.ArrowNotImplementedError, pa.ArrowInvalid, pa.ArrowTypeError):
            raise self._unsupported(self.node, f"cannot cast {value.type} to {target}") from None
        return _Typed(value.expr.cast(target), target)

    def _cast_scalar(self, scalar: pa.Scalar, target: pa.DataType) -> pa.Scalar:
        try:
            if pa.types.is_string(scalar.type) and _is_temporal(target) and scalar.is_valid:
                return pa.scalar(_parse_temporal(scalar.as_py(), target), target)
            if (pa.types.is_floating(scalar.type) or pa.types.is_decimal(scalar.type)) and pa.types.is_integer(target) \
                    and scalar.is_valid:
                return pa.scalar(int(scalar.as_py()), target)  # int() truncates toward zero, as Spark
            if pa.types.is_timestamp(scalar.type) and pa.types.is_date(target):
                return scalar.cast(target, safe=False)
            return scalar.cast(target)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, ValueError) as e:
            raise self._unsupported(self.node, f"cannot cast {scalar.as_py()!r} to {target}: {_first_line(e)}") from None

    def _unify(self, values: list[_Typed], rule: Callable, what: str) -> list[_Typed]:
        """``values`` cast to one type by ``rule`` (``_compare_type`` or ``_value_type``)."""
        common = _NULL
        for v in values:
            nxt = rule(common, v.type)
            if nxt is None:
                raise self._unsupported(self.node, f"cannot {what} {common} and {v.type}")
            common = nxt
        return [self._cast(v, common) for v in values]

    def _boolean(self, node: exp.Expression) -> _Typed:
        value = self.compile(node)
        if value.type not in (_BOOL, _NULL):
            raise self._unsupported(self.node, f"`{node.sql(dialect='spark')}` is {value.type}, not a boolean")
        return self._cast(value, _BOOL)

    def _null_of(self, t: pa.DataType) -> _Typed:
        return _constant(pa.scalar(None, t))

    def _literal_int(self, node: exp.Expression | None, what: str, default: int | None = None) -> int | None:
        if node is None:
            return default
        value = self.compile(node)
        if value.scalar is None or not pa.types.is_integer(value.type):
            raise self._unsupported(self.node, f"{what} must be an integer literal")
        return value.scalar.as_py()

    def _literal_string(self, node: exp.Expression, what: str) -> str:
        value = self.compile(node)
        if value.scalar is None or not _is_string(value.type) or not value.scalar.is_valid:
            raise self._unsupported(self.node, f"{what} must be a string literal")
        return value.scalar.as_py()

    # --- leaves ------------------------------------------------------------------------------
    def _column(self, node: exp.Column) -> _Typed:
        try:
            name = self.resolver.resolve(node)
        except SchemaMismatchError:
            found = self.resolver.struct_field(node)  # `s.a`, `t.s.a`: a field of a struct column
            if found is None:
                raise
            name, path, field_type = found
            return _Typed(pc.field(name, *path), field_type)
        return _Typed(pc.field(name), self.resolver.columns[name])

    def _literal(self, node: exp.Literal) -> _Typed:
        if node.is_string:
            return _constant(pa.scalar(node.this, pa.string()))
        return _constant(_number(node.this))

    # --- arithmetic -------------------------------------------------------------------------
    def _numbers(self, node: exp.Binary) -> tuple[_Typed, _Typed]:
        a, b = self.compile(node.this), self.compile(node.expression)
        for side in (a, b):
            if not (_is_numeric(side.type) or side.type == _NULL):
                raise self._unsupported(node, f"arithmetic needs numbers, got {side.type}; CAST it first")
        common = _numeric_type(a.type if a.type != _NULL else pa.int32(), b.type if b.type != _NULL else pa.int32())
        if pa.types.is_decimal(common):  # Arrow computes decimals in its own result precision: keep each scale
            return self._cast(a, _as_decimal(a.type) if a.type != _NULL else common), \
                self._cast(b, _as_decimal(b.type) if b.type != _NULL else common)
        return self._cast(a, common), self._cast(b, common)

    def _arithmetic(self, fn: str, node: exp.Binary) -> _Typed:
        a, b = self._numbers(node)
        if not pa.types.is_decimal(a.type):
            return self._call(fn, [a, b])
        wide = [pa.decimal256(v.type.precision, v.type.scale) for v in (a, b)]
        exact = pc.call_function(fn, [pa.array([], t) for t in wide]).type
        if exact.precision <= 38:
            return self._call(fn, [a, b])
        # Past 38 digits Spark keeps the integer digits and gives up scale (down to 6),
        # rounding half up: compute in 256 bits, then round and narrow the same way.
        scale = max(38 - (exact.precision - exact.scale), min(exact.scale, 6))
        product = self._call(fn, [self._cast(a, wide[0]), self._cast(b, wide[1])])
        rounded = self._call("round", [product], pc.RoundOptions(scale, round_mode="half_towards_infinity"))
        return self._checked_cast(_Typed(rounded.expr.cast(pa.decimal256(exact.precision, scale), safe=False),
                                         pa.decimal256(exact.precision, scale)), pa.decimal128(38, scale))

    def _neg(self, node: exp.Neg) -> _Typed:
        value = self.compile(node.this)
        if value.scalar is not None and _is_numeric(value.type):
            return _constant(pc.negate_checked(value.scalar))
        return self._numeric_call("negate_checked", node.this, value)

    def _numeric_call(self, fn: str, node: exp.Expression, value: _Typed | None = None) -> _Typed:
        value = value or self.compile(node)
        if not (_is_numeric(value.type) or value.type == _NULL):
            raise self._unsupported(self.node, f"{fn.split('_')[0]} needs a number, got {value.type}")
        return self._call(fn, [self._cast(value, value.type if value.type != _NULL else _F64)])

    def _zero_safe(self, divisor: _Typed) -> tuple[pc.Expression, _Typed]:
        """(divisor is zero, the divisor with zeros replaced by one): Arrow evaluates both IF branches."""
        zero = pc.Expression._call("equal", [divisor.expr, pc.scalar(_small(0, divisor.type))])
        one = pc.scalar(_small(1, divisor.type))
        return zero, _Typed(pc.Expression._call("if_else", [zero, one, divisor.expr]), divisor.type)

    def _null_if_zero(self, is_zero: pc.Expression, value: _Typed) -> _Typed:
        null = pc.scalar(pa.scalar(None, value.type))
        return _Typed(pc.Expression._call("if_else", [is_zero, null, value.expr]), value.type)

    def _divide(self, node: exp.Div) -> _Typed:
        # Spark's `/` is always a double division (decimals too, here: see SEMANTICS).
        a, b = (self._cast(v, _F64) for v in self._numbers(node))
        is_zero, safe = self._zero_safe(b)
        return self._null_if_zero(is_zero, self._call("divide", [a, safe]))

    def _int_divide(self, node: exp.IntDiv) -> _Typed:
        a, b = self._numbers(node)
        if not all(pa.types.is_integer(v.type) for v in (a, b)):
            raise self._unsupported(node, "div needs integers; CAST the operands to bigint")
        a, b = self._cast(a, pa.int64()), self._cast(b, pa.int64())
        is_zero, safe = self._zero_safe(b)
        return self._null_if_zero(is_zero, self._call("divide_checked", [a, safe]))  # truncates, as Spark

    def _modulo(self, node: exp.Mod) -> _Typed:
        a, b = self._numbers(node)
        is_zero, safe = self._zero_safe(b)
        floor_mod = self._call("modulo", [a, safe])  # Arrow: sign of the divisor; Spark: sign of the dividend
        zero = pc.scalar(_small(0, floor_mod.type))
        differs = pc.Expression._call("and", [
            pc.Expression._call("not_equal", [floor_mod.expr, zero]),
            pc.Expression._call("not_equal", [pc.Expression._call("less", [floor_mod.expr, zero]),
                                              pc.Expression._call("less", [a.expr, pc.scalar(_small(0, a.type))])])])
        shifted = self._cast(self._call("subtract", [floor_mod, safe]), floor_mod.type)
        fixed = _Typed(pc.Expression._call("if_else", [differs, shifted.expr, floor_mod.expr]), floor_mod.type)
        return self._null_if_zero(is_zero, fixed)

    # --- comparisons and logic -----------------------------------------------------------------
    def _compare(self, fn: str, left: exp.Expression, right: exp.Expression, node: exp.Expression) -> _Typed:
        a, b = self._unify([self.compile(left), self.compile(right)], _compare_type, "compare")
        if a.type == _NULL:
            return self._null_of(_BOOL)
        return self._call(fn, [a, b])

    def _logic(self, node: exp.Connector) -> _Typed:
        fn = "and_kleene" if isinstance(node, exp.And) else "or_kleene"  # SQL's three-valued logic
        return self._call(fn, [self._boolean(node.this), self._boolean(node.expression)])

    def _not(self, node: exp.Not) -> _Typed:
        return self._call("invert", [self._boolean(node.this)])

    def _null_safe_eq(self, node: exp.NullSafeEQ) -> _Typed:
        a, b = self._unify([self.compile(node.this), self.compile(node.expression)], _compare_type, "compare")
        if a.type == _NULL:
            return _constant(pa.scalar(True))
        equal = pc.Expression._call("coalesce", [pc.Expression._call("equal", [a.expr, b.expr]), pc.scalar(False)])
        both_null = pc.Expression._call("and", [a.expr.is_null(), b.expr.is_null()])
        return _Typed(pc.Expression._call("or", [equal, both_null]), _BOOL)

    def _is(self, node: exp.Is) -> _Typed:
        target = node.expression
        if isinstance(target, exp.Null):
            return _Typed(self.compile(node.this).expr.is_null(), _BOOL)
        if isinstance(target, exp.Boolean):
            value = self._boolean(node.this)
            expr = value.expr if target.this else pc.Expression._call("invert", [value.expr])
            return _Typed(pc.Expression._call("coalesce", [expr, pc.scalar(False)]), _BOOL)
        raise self._unsupported(node, "IS takes NULL, TRUE or FALSE")

    def _in(self, node: exp.In) -> _Typed:
        if node.args.get("query") or node.args.get("unnest") or node.args.get("field"):
            raise self._unsupported(node, "IN takes a list of values, not a subquery")
        values = self._unify([self.compile(node.this)] + [self.compile(e) for e in node.expressions],
                             _compare_type, "compare")
        x, items = values[0], values[1:]
        if x.type == _NULL or not items:
            return self._null_of(_BOOL)
        constants = [v.scalar for v in items if v.scalar is not None and v.scalar.is_valid]
        has_null = any(v.scalar is not None and not v.scalar.is_valid for v in items)
        found = _Typed(pc.scalar(False), _BOOL)
        if constants:
            value_set = pa.array([s.as_py() for s in constants], x.type)
            found = self._call("is_in", [x], pc.SetLookupOptions(value_set, skip_nulls=True))
        for item in (v for v in items if v.scalar is None):  # non-constant items: x = item, SQL's nulls
            found = self._call("or_kleene", [found, self._call("equal", [x, item])])
        if has_null:  # no match against a list holding NULL is NULL, not false
            found = self._call("or_kleene", [found, self._null_of(_BOOL)])
        return _Typed(pc.Expression._call("if_else", [x.expr.is_valid(), found.expr, pc.scalar(pa.scalar(None, _BOOL))]),
                      _BOOL)

    def _between(self, node: exp.Between) -> _Typed:
        if node.args.get("symmetric"):
            raise self._unsupported(node, "BETWEEN SYMMETRIC is not supported")
        low = self._compare("greater_equal", node.this, node.args["low"], node)
        high = self._compare("less_equal", node.this, node.args["high"], node)
        return self._call("and_kleene", [low, high])

    def _like(self, node: exp.Like | exp.ILike, escape: str | None = None) -> _Typed:
        subject = self._as_string(self.compile(node.this))
        pattern = self._literal_string(node.expression, "a LIKE pattern")
        if escape is not None:
            pattern = _with_backslash_escape(pattern, escape)
        options = pc.MatchSubstringOptions(pattern, ignore_case=isinstance(node, exp.ILike))
        return self._call("match_like", [subject], options)

    def _escape(self, node: exp.Escape) -> _Typed:
        escape = self._literal_string(node.expression, "an ESCAPE character")
        if not isinstance(node.this, (exp.Like, exp.ILike)) or len(escape) != 1:
            raise self._unsupported(node, "ESCAPE takes one character after LIKE or ILIKE")
        return self._like(node.this, escape)

    def _rlike(self, node: exp.RegexpLike) -> _Typed:
        subject = self._as_string(self.compile(node.this))
        pattern = self._literal_string(node.expression, "an RLIKE pattern")
        return self._call("match_substring_regex", [subject], pc.MatchSubstringOptions(pattern))

    # --- conditionals ------------------------------------------------------------------------
    def _choose(self, conditions: list[_Typed], values: list[_Typed], default: _Typed | None) -> _Typed:
        """The first value whose condition is true (NULL counts as false), else ``default``."""
        unified = self._unify(values + ([default] if default is not None else []), _value_type, "combine")
        if unified[0].type == _NULL:
            return self._null_of(_NULL)
        names = [f"c{i}" for i in range(len(conditions))]
        struct = self._call("make_struct", conditions, pc.MakeStructOptions(names))
        return self._call("case_when", [struct, *unified])

    def _case(self, node: exp.Case) -> _Typed:
        operand = node.this
        conditions = []
        for branch in node.args.get("ifs") or []:
            if operand is None:
                conditions.append(self._boolean(branch.this))
            else:  # CASE x WHEN v: x = v, so a NULL x matches no branch
                conditions.append(self._compare("equal", operand, branch.this, branch))
        values = [self.compile(branch.args["true"]) for branch in node.args.get("ifs") or []]
        default = node.args.get("default")
        return self._choose(conditions, values, self.compile(default) if default is not None else None)

    def _if(self, node: exp.If) -> _Typed:
        false = node.args.get("false")
        return self._choose([self._boolean(node.this)], [self.compile(node.args["true"])],
                            self.compile(false) if false is not None else None)

    def _nullif(self, node: exp.Nullif) -> _Typed:
        value = self.compile(node.this)
        equal = self._compare("equal", node.this, node.expression, node)
        return self._choose([equal], [self._null_of(value.type)], value)

    def _coalesce(self, node: exp.Coalesce) -> _Typed:
        values = self._unify([self.compile(node.this)] + [self.compile(e) for e in node.expressions], _value_type,
                             "combine")
        return self._call("coalesce", values) if values[0].type != _NULL else values[0]

    def _anonymous(self, node: exp.Anonymous) -> _Typed:
        name = str(node.this).lower()
        if name == "iff" and len(node.expressions) == 3:
            cond, true, false = node.expressions
            return self._choose([self._boolean(cond)], [self.compile(true)], self.compile(false))
        raise self._unsupported(node, self._why_unsupported(node))

    # --- strings -----------------------------------------------------------------------------
    def _as_string(self, value: _Typed) -> _Typed:
        return value if _is_string(value.type) else self._cast(value, pa.string())

    def _string_call(self, fn: str, node: exp.Expression, options: pc.FunctionOptions | None = None) -> _Typed:
        return self._call(fn, [self._as_string(self.compile(node))], options)

    def _length(self, node: exp.Length) -> _Typed:
        value = self.compile(node.this)
        fn = "binary_length" if pa.types.is_binary(value.type) else "utf8_length"
        subject = value if fn == "binary_length" else self._as_string(value)
        return self._cast(self._call(fn, [subject]), pa.int32())  # Spark's length is an int

    def _trim(self, node: exp.Trim) -> _Typed:
        position = (node.args.get("position") or "BOTH").upper()
        fn = {"LEADING": "utf8_ltrim", "TRAILING": "utf8_rtrim"}.get(position, "utf8_trim")
        chars = node.expression
        # Spark trims spaces only (not tabs or newlines) unless characters are given.
        characters = " " if chars is None else self._literal_string(chars, "the characters to trim")
        return self._string_call(fn, node.this, pc.TrimOptions(characters))

    def _substring(self, node: exp.Substring) -> _Typed:
        pos = self._literal_int(node.args.get("start"), "substring's position", 1)
        length = self._literal_int(node.args.get("length"), "substring's length")
        start, stop = _spark_slice(pos, length)
        return self._string_call("utf8_slice_codeunits", node.this, pc.SliceOptions(start, stop))

    def _concat(self, node: exp.Concat | exp.DPipe) -> _Typed:
        parts = node.expressions if isinstance(node, exp.Concat) else [node.this, node.expression]
        strings = self._unify([self._as_string(self._cast(v, pa.string()) if v.type == _NULL else v)
                               for v in (self.compile(p) for p in parts)], _compare_type, "concatenate")
        if len(strings) == 1:
            return strings[0]
        separator = _constant(pa.scalar("", strings[0].type))
        return self._call("binary_join_element_wise", [*strings, separator])  # any NULL part: NULL, as Spark

    # --- numbers -----------------------------------------------------------------------------
    def _round(self, node: exp.Round) -> _Typed:
        value = self.compile(node.this)
        digits = self._literal_int(node.args.get("decimals"), "round's scale", 0)
        if value.type == _NULL:
            return self._null_of(_F64)
        if not _is_numeric(value.type):
            raise self._unsupported(node, f"round needs a number, got {value.type}")
        options = pc.RoundOptions(digits, round_mode="half_towards_infinity")  # Spark's HALF_UP
        if pa.types.is_integer(value.type):
            if digits >= 0:
                return value
            rounded = self._call("round", [self._cast(value, _F64)], options)
            return self._cast(rounded, value.type)
        if pa.types.is_decimal(value.type):
            if digits < 0:
                raise self._unsupported(node, "round(decimal, d) with d < 0 is not supported")
            p, s = value.type.precision, value.type.scale
            scale = min(s, digits)
            widened = self._cast(value, pa.decimal128(min(38, p + 1), s))  # 9.99 -> 10.0 needs a digit more
            return self._cast(self._call("round", [widened], options), pa.decimal128(min(38, p - s + 1 + scale), scale))
        return self._call("round", [value], options)

    def _floor_ceil(self, fn: str, node: exp.Floor | exp.Ceil) -> _Typed:
        if node.args.get("decimals") is not None:
            raise self._unsupported(node, f"{fn} takes one argument")
        value = self.compile(node.this)
        if not (_is_numeric(value.type) or value.type == _NULL):
            raise self._unsupported(node, f"{fn} needs a number, got {value.type}")
        if pa.types.is_decimal(value.type):  # Spark: decimal(p - s + 1, 0)
            p, s = value.type.precision, value.type.scale
            widened = self._cast(value, pa.decimal128(min(38, p + 1), s))
            return self._cast(self._call(fn, [widened]), pa.decimal128(min(38, p - s + 1), 0))
        if pa.types.is_integer(value.type) or value.type == _NULL:
            return self._cast(value, pa.int64())
        return self._cast(self._call(fn, [value]), pa.int64())  # Spark: floor(double) is a bigint

    def _extreme(self, fn: str, node: exp.Greatest | exp.Least) -> _Typed:
        values = self._unify([self.compile(node.this)] + [self.compile(e) for e in node.expressions], _value_type,
                             "compare")
        if values[0].type == _NULL:
            return values[0]
        # NULLs are skipped; NULL only when every argument is (Spark's greatest/least).
        return self._call(f"{fn}_element_wise", values, pc.ElementWiseAggregateOptions(skip_nulls=True))

    # --- dates -------------------------------------------------------------------------------
    def _to_date(self, node: exp.TsOrDsToDate) -> _Typed:
        value = self.compile(node.this)
        if pa.types.is_date(value.type) or value.type == _NULL:
            return self._cast(value, pa.date32())
        if _is_string(value.type) or pa.types.is_timestamp(value.type):
            return self._cast(value, pa.date32())
        raise self._unsupported(self.node, f"needs a date, got {value.type}")

    def _date_part(self, fn: str, node: exp.Func) -> _Typed:
        value = self.compile(node.this)
        if value.type == _NULL:
            return self._null_of(pa.int32())
        if not _is_temporal(value.type):
            value = self._cast(value, pa.date32())
        return self._cast(self._call(fn, [value]), pa.int32())

    def _cast_node(self, node: exp.Cast) -> _Typed:
        target = _arrow_type(node.to)
        if target is None:
            raise self._unsupported(node, f"type {node.to.sql(dialect='spark')} is not supported; supported: "
                                          "boolean, tinyint, smallint, int, bigint, float, double, decimal(p,s), "
                                          "string, date, timestamp, timestamp_ntz, binary")
        value = self.compile(node.this)
        if value.type == _NULL:
            return self._null_of(target)
        if value.type == target:
            return value
        return self._cast(value, target)


def _small(value: int, t: pa.DataType) -> pa.Scalar:
    """A small integer constant of the numeric type ``t`` (decimals too, whatever their precision)."""
    return pa.scalar(decimal.Decimal(value), t) if pa.types.is_decimal(t) else pa.scalar(value, t)


def _arrow_type(node: exp.DataType) -> pa.DataType | None:
    if node.this == exp.DataType.Type.DECIMAL:
        params = [int(p.this.this) for p in node.expressions] if node.expressions else []
        precision, scale = (params + [10, 0][len(params):])[:2] if params else (10, 0)
        if not 1 <= precision <= 38 or not 0 <= scale <= precision:
            return None
        return pa.decimal128(precision, scale)
    return _TYPE_NAMES.get(node.this)


def _number(text: str) -> pa.Scalar:
    """A numeric literal typed as Spark types it: int, bigint, decimal(p, s) or (with an exponent) double."""
    if "e" in text.lower():
        return pa.scalar(float(text), _F64)
    if "." not in text:
        value = int(text)
        if -2**31 <= value < 2**31:
            return pa.scalar(value, pa.int32())
        if -2**63 <= value < 2**63:
            return pa.scalar(value, pa.int64())
    value = decimal.Decimal(text)
    digits, exponent = len(value.as_tuple().digits), value.as_tuple().exponent
    scale = max(0, -exponent)
    precision = max(digits, scale, 1)
    if precision > 38:
        return pa.scalar(float(text), _F64)  # Spark: a literal past decimal(38) is a double
    return pa.scalar(value, pa.decimal128(precision, scale))


def _parse_temporal(text: str, target: pa.DataType) -> dt.date | dt.datetime:
    """A DATE '...' / TIMESTAMP '...' literal; a timestamp without a zone is UTC (the session time zone)."""
    text = text.strip()
    if pa.types.is_date(target):
        return dt.date.fromisoformat(text[:10]) if len(text) >= 10 else dt.date.fromisoformat(text)
    value = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    if target.tz is None:
        return value.replace(tzinfo=None) if value.tzinfo is None else value.astimezone(dt.timezone.utc).replace(tzinfo=None)
    return value.replace(tzinfo=dt.timezone.utc) if value.tzinfo is None else value.astimezone(dt.timezone.utc)


def _spark_slice(pos: int, length: int | None) -> tuple[int, int | None]:
    """Spark's 1-based ``substring(s, pos, len)`` as Arrow's 0-based (start, stop) slice.

    pos 0 counts as 1; a negative pos counts from the end; a stop past the end
    (or, from the end, at or past it) is open.
    """
    start = pos - 1 if pos > 0 else pos  # pos 0 and 1 both start at the first character
    if length is None:
        return start, None
    if length <= 0:
        return 0, 0
    stop = start + length
    if start < 0 and stop >= 0:
        return start, None
    return start, stop


def _with_backslash_escape(pattern: str, escape: str) -> str:
    """A LIKE pattern with escape character ``escape`` rewritten for Arrow (backslash escapes)."""
    out, chars = [], iter(pattern)
    for ch in chars:
        if ch == escape:
            nxt = next(chars, "")
            out.append("\\" + nxt)
        elif ch == "\\":
            out.append("\\\\")
        else:
            out.append(ch)
    return "".join(out)
