"""Hypothesis fuzzing of attention kernels, and ``python -m fuzz``, its command line.

- :mod:`fuzz.strategies`: cases (lengths on tile edges, ``n_q != n_k``, decode pairs, head dims,
  dtypes, value distributions, layouts) and packed variable-length batches, sized for the CPU or the GPU;
- :mod:`fuzz.profiles`: the Hypothesis profiles (``dev``, ``ci``, ``nightly``, ``gpu``) and the one
  example database (``$FLASH_HYPOTHESIS_DB``), shared by pytest and the command line;
- :mod:`fuzz.engine`: the Hypothesis test behind every fuzz run, keyed by check so that pytest and
  ``python -m fuzz`` share saved failures;
- :mod:`fuzz.isolation`: checks run in a worker process, so a crash is one case's failure;
- :mod:`fuzz.runner`: ``fuzz run``, every check for a time budget;
- :mod:`fuzz.gpus`: one GPU per pytest-xdist worker and per ``fuzz run`` worker;
- :mod:`fuzz.out_of_memory`: a pytest plugin: a test that runs the GPU out of memory runs again alone;
- :mod:`fuzz.parallel`: ``fuzz run --workers N``, the checks shared among N processes;
- :mod:`fuzz.report`: ``fuzz report``, a markdown table of checks x kernels from fuzzing each;
- :mod:`fuzz.corpus`: the regression corpus (``fuzz/corpus.txt``) that ``fuzz pin`` appends to;
- :mod:`fuzz.plot`: ``fuzz repro --plot``, the output's error over (row, column).
"""
