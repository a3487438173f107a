"""Prometheus metrics: per-job figures from workers, Redis-side figures from `apportion metrics`."""
