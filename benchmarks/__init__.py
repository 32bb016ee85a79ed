"""Speed benchmarks of the kernel (pytest-benchmark, GPU only), the speed gate, reports and plots.

See ``benchmarks/conftest.py`` for the options, :mod:`benchmarks.harness` for how a GPU call is
timed, :mod:`benchmarks.gate` for the gate, and the README's "Speed benchmarks" section.
"""
