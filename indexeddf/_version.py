"""The version of the indexeddf package (its own module, so that every layer can
name it without importing the package root)."""

__version__ = "0.1.0"
