"""The embedded demo: an in-process worker on an in-memory broker (no Redis needed)."""
