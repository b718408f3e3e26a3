"""format layer."""
