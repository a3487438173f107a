"""Result events: publishing each job's envelope once, and following the streams."""
