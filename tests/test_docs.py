"""Documentation stays true to the code."""

from pathlib import Path

from indexeddf.spec.config import PROPERTIES

DOCS = Path(__file__).parent.parent / "docs"


def test_every_table_property_is_documented_with_its_default():
    text = (DOCS / "options.md").read_text()
    for name, prop in PROPERTIES.items():
        assert f"`{name}` | `{prop.default}`" in text, name
