"""Launcher hooks for launch_select: launch the chosen candidate, reselect on failure."""
