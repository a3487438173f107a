"""Redis connections and every Redis key name apportion uses."""
