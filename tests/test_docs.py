"""Documentation stays true to the code."""

import ast
import contextlib
import io
import re
from pathlib import Path

from indexeddf.spec.config import PROPERTIES

DOCS = Path(__file__).parent.parent / "docs"


def test_every_table_property_is_documented_with_its_default():
    text = (DOCS / "options.md").read_text()
    for name, prop in PROPERTIES.items():
        assert f"`{name}` | `{prop.default}`" in text, name


# -- the examples of a guide page run, and print what the page says ---------------------------
NOT_RUN = re.compile(r"<!-- not run: (?P<why>[^>]*\S)\s*-->\n```python\n.*?^```", re.S | re.M)
"""A block a page marks as not run, with the reason (a server or credentials it needs)."""


def _python_blocks(text: str) -> list[str]:
    """The page's Python examples that run (those marked ``<!-- not run: why -->`` left out)."""
    return re.findall(r"^```python\n(.*?)^```", NOT_RUN.sub("", text), re.S | re.M)


def _matches(expected: str, actual: str) -> bool:
    """``actual`` equals ``expected`` where ``...`` in it stands for any text, whitespace
    runs counted as one space (the page wraps long values)."""
    def squeeze(s: str) -> str:
        return re.sub(r"\s+", " ", s).strip()

    pattern = ".*?".join(re.escape(part) for part in squeeze(expected).split("..."))
    return re.fullmatch(pattern, squeeze(actual)) is not None


def _comments_after(lines: list[str], end: int, stop: int) -> list[str]:
    """The comment lines right after a statement (its 0-based last line ``end``), up to the next
    statement (line ``stop``) or a blank line."""
    out = []
    for line in lines[end + 1:stop]:
        if not line.startswith("#"):
            break
        out.append(line)
    return out


def _run_block(source: str, ns: dict, where: str) -> int:
    """Run one example block statement by statement; check each ``# -> value`` (the repr of the
    statement's value) and each printed output written as ``# `` lines under it. Returns how
    many were checked."""
    lines = source.split("\n")
    body = ast.parse(source).body
    checked = 0
    for i, st in enumerate(body):
        stop = body[i + 1].lineno - 1 if i + 1 < len(body) else len(lines)
        code = "\n".join(lines[st.lineno - 1:st.end_lineno])
        after = _comments_after(lines, st.end_lineno - 1, stop)
        inline = re.search(r"#\s*->\s*(.*)$", lines[st.end_lineno - 1])
        if inline or (after and after[0].startswith("# ->")):
            expected = inline.group(1) if inline else " ".join(c.lstrip("#").strip() for c in after)[3:]
            assert isinstance(st, ast.Expr), f"{where}: '# ->' after a statement that is no expression: {code}"
            value = eval(compile(ast.Expression(st.value), where, "eval"), ns)
            assert _matches(expected, repr(value)), f"{where}: {code}\n  page says: {expected}\n  code gives: {value!r}"
            checked += 1
            continue
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(ast.Module([st], []), where, "exec"), ns)
        printed = out.getvalue().rstrip("\n").split("\n") if out.getvalue() else []
        if printed and after:
            expected = [c[2:] if c.startswith("# ") else c[1:] for c in after]
            assert len(printed) == len(expected) and all(_matches(e, a) for e, a in zip(expected, printed)), (
                f"{where}: {code}\n  page says:\n" + "\n".join(expected) + "\n  code prints:\n" + "\n".join(printed))
            checked += 1
    return checked


def _run_page(page: str, tmp_path, ns: dict | None = None) -> int:
    """Run every example of ``docs/<page>.md`` in order in one namespace, its tables under
    ``tmp_path`` (a page writes them under ``/tmp/<page>-guide``); returns the checks made."""
    text = (DOCS / f"{page}.md").read_text().replace(f"/tmp/{page}-guide", str(tmp_path / f"{page}-guide"))
    ns = {} if ns is None else ns
    return sum(_run_block(b, ns, f"docs/{page}.md block {i + 1}") for i, b in enumerate(_python_blocks(text)))


def test_the_indexes_guide_runs_and_prints_what_it_says(tmp_path, monkeypatch):
    """docs/indexes.md's examples run in order in one session, as the page says, and every
    value and printed line it shows is what the code gives (``...``: any text)."""
    from indexeddf.reader.cache import cache, configure

    before = cache().max_bytes
    try:
        checked = _run_page("indexes", tmp_path)
    finally:
        configure(max_bytes=before)
    assert checked >= 20


def test_the_changes_guide_runs_and_prints_what_it_says(tmp_path):
    assert _run_page("changes", tmp_path) >= 4


def test_the_admin_guide_runs_and_prints_what_it_says(tmp_path, spark):
    assert _run_page("admin", tmp_path) >= 5


def test_the_joins_guide_runs_and_prints_what_it_says(tmp_path, spark):
    assert _run_page("joins", tmp_path) >= 4


def test_the_spark_guide_runs_and_prints_what_it_says(tmp_path, spark):
    assert _run_page("spark", tmp_path) >= 9


def test_the_pipelines_guide_runs_and_prints_what_it_says(tmp_path, spark):
    """docs/pipelines.md's streams, feed reads and bronze/silver/gold pipeline run as the page says."""
    assert _run_page("pipelines", tmp_path) >= 15


RUN_PAGES = {"indexes", "changes", "admin", "joins", "spark", "pipelines"}


def test_every_python_example_in_the_docs_runs_or_says_why_not():
    """A page's Python blocks run in one of the tests above; a block that cannot run here is
    marked ``<!-- not run: why -->`` right above it."""
    for page in sorted(DOCS.glob("*.md")):
        text = page.read_text()
        if _python_blocks(text):
            assert page.stem in RUN_PAGES, f"docs/{page.name} has Python examples that no test runs"
        skipped = len(re.findall(r"^```python", text, re.M)) - len(_python_blocks(text))
        assert skipped == len(NOT_RUN.findall(text)), page.name
