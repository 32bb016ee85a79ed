"""Hypothesis strategies and the fuzzing command line (being built; see the project's issues)."""
