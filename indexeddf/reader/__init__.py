"""reader layer."""
