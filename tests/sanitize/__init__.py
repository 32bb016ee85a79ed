"""The memory-safety gate: the kernel under compute-sanitizer memcheck (``python -m tests.sanitize``).

- :mod:`tests.sanitize.__main__`: the driver (finds compute-sanitizer, runs the cases under it,
  prints a summary, exits non-zero on any error);
- :mod:`tests.sanitize.cases`: the cases (regression corpus, exactly-sized edge cases, a seeded
  fuzz sample) and the process that runs them;
- :mod:`tests.sanitize.report`: reading the sanitizer's output;
- :mod:`tests.sanitize.out_of_bounds`: a kernel module that reads past the end of k and v with the
  right numbers, which the gate must catch.
"""
