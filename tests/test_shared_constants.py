"""The constants the JVM connector shares with Python have one definition, in ``indexeddf/spec/``
(``indexeddf/spec/shared.py``): the jar holds them as ``io/indexeddf/log/spec.json``, the
connector reads them from there (``io.indexeddf.log.Spec``), and no Java source repeats one.
Each check here fails when a constant drifts: a value typed into a Java source, a jar built
from other constants, or a JVM that reads something else than Python defines."""

from __future__ import annotations

import json
import re
import shutil
import zipfile

import pytest

from indexeddf.spark import connector
from indexeddf.spec import bucketing, config, features, states
from indexeddf.spec.shared import RESOURCE, shared_constants, shared_json

JAVA = connector.sources_dir() / "java"

ALLOWED = {
    ("DeltaLog.java", "MAX_SNAPSHOT_FILES = 1_000_000"),
    ("LookupLimits.java", '"spark.indexeddf.lookup.maxReadFraction", "0.5"'),
}
"""Java lines that hold a shared value by coincidence (file, a fragment of the line): the
snapshot cache's bound on files is not the key cap, the default of a Spark conf is not the
share of index blocks."""


def test_the_document_holds_what_spec_defines():
    doc = json.loads(shared_json())
    assert doc["bucketSeed"] == bucketing.SEED == 42
    assert doc["keyHashSeed"] == bucketing.KEY_HASH_SEED
    assert doc["maxIndexKeys"] == config.MAX_INDEX_KEYS
    assert doc["propertyDefaults"] == {"indexeddf.hybridScan.maxAppendedRatio": "0.3",
                                       "indexeddf.hybridScan.maxDeletedRatio": "0.2"}
    assert set(doc["readableStates"]) == set(states.READABLE_STATES)
    assert set(doc["readerFeatures"]) == set(features.READ_FEATURES)
    assert doc == shared_constants()


def _code(text: str) -> str:
    """Java source without its comments (a constant named in a comment is no copy of it)."""
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group().count("\n"), text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def _patterns(value) -> list[str]:
    """How ``value`` would be spelled as a Java literal."""
    if isinstance(value, bool):
        return []
    if isinstance(value, int):
        return [rf"\b{value}\b", rf"\b0x{value:x}\b", rf"\b{value:_}\b"]
    if isinstance(value, float):
        return [rf"(?<![\w.]){re.escape(repr(value))}[dDfF]?(?![\w.])"]
    if isinstance(value, str):
        number = [rf"(?<![\w.]){re.escape(value)}(?![\w.])"] if re.fullmatch(r"\d+\.\d+", value) else []
        return [re.escape(f'"{value}"'), *number]
    items = value.values() if isinstance(value, dict) else value
    return [p for v in items for p in _patterns(v)]


def test_no_java_source_repeats_a_shared_constant():
    copies = []
    for path in sorted(JAVA.rglob("*.java")):
        if path.name == "Spec.java":
            continue
        lines = _code(path.read_text()).splitlines()
        for name, value in shared_constants().items():
            for pattern in _patterns(value):
                for i, line in enumerate(lines):
                    if re.search(pattern, line, re.I) and not any(
                            path.name == f and frag in line for f, frag in ALLOWED):
                        copies.append(f"{path.relative_to(JAVA)}:{i + 1}: {name} {value!r}: {line.strip()}")
    assert not copies, "Java sources repeat constants of indexeddf/spec/ (read them from io.indexeddf.log.Spec):\n" \
        + "\n".join(copies)


@pytest.mark.skipif(shutil.which("javac") is None, reason="needs a JDK")
def test_the_jar_holds_the_document():
    jar = connector.build_jar()
    with zipfile.ZipFile(jar) as z:
        assert json.loads(z.read(RESOURCE)) == shared_constants()


def test_a_changed_constant_rebuilds_the_jar(monkeypatch):
    """The jar's content hash covers the document: a constant changed in Python makes the jar
    stale, so set-up rebuilds it instead of keeping the old value in the JVM."""
    before = connector.sources_hash()
    monkeypatch.setattr(config, "MAX_INDEX_KEYS", config.MAX_INDEX_KEYS + 1)
    assert connector.sources_hash() != before


@pytest.mark.spark
def test_the_jvm_reads_the_constants_python_defines(spark):
    from connector_helpers import jvm_diagnostic

    assert json.loads(jvm_diagnostic(spark, "sharedConstants")) == shared_constants()
