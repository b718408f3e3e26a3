"""optimizer layer."""
