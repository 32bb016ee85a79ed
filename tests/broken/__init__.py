"""Deliberately wrong kernel modules: the suite must fail each of them, with a clear message."""
