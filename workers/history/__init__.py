"""The failure-history store that the ``failure_penalty`` policy module reads."""
