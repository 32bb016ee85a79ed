"""Reading a saved run: pytest-benchmark's JSON, as the results of :mod:`benchmarks.harness`.

A run is what ``--benchmark-json FILE``, ``--benchmark-save`` or ``--benchmark-autosave`` writes:
``{"machine_info": ..., "commit_info": ..., "datetime": ..., "benchmarks": [...]}``, each
benchmark with ``name``, ``fullname``, ``group``, ``stats`` (seconds per call: ``median``,
``min``, ...) and our ``extra_info`` (backend, pass, shape, FLOPs). Benchmarks without that
``extra_info`` (not ours), the feature benchmarks (``bench_features.py``: their ``extra_info``
has a ``scenario``; :mod:`benchmarks.report_features` reads them) and the decode benchmarks
(``test_decode_speed.py``: ``kind`` is ``decode``; :mod:`benchmarks.report_speed` reads them) are
ignored. Used by
``report.py``, ``plot.py`` and ``gate.py``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from benchmarks.shapes import PASSES, Shape


class RunError(ValueError):
    """A file that is not a readable pytest-benchmark run."""


@dataclass(frozen=True)
class Result:
    """One benchmark of a run: which backend on which shape and pass, and how long it took."""

    name: str
    backend: str
    pass_: str
    shape: Shape
    flops: float
    median: float  # seconds per call
    kernel_module: str | None = None

    @property
    def tflops(self) -> float:
        return self.flops / self.median / 1e12

    @property
    def key(self) -> tuple:
        """What two results must share to be the same problem: pass and shape."""
        return (self.pass_, self.shape)


@dataclass(frozen=True)
class Run:
    path: Path
    machine: dict
    datetime: str
    results: list[Result]

    @property
    def kernel_module(self) -> str:
        modules = sorted({r.kernel_module for r in self.results if r.kernel_module})
        return ", ".join(modules) or "?"

    @property
    def device(self) -> str:
        info = self.machine.get("flash_bench")
        if info is None:
            return "?"
        return info.get("gpu") or "cpu"

    def by_key(self) -> dict[tuple, dict[str, Result]]:
        """``{(pass, shape): {backend: result}}``, in the order :func:`sort_key` gives."""
        table: dict[tuple, dict[str, Result]] = {}
        for result in sorted(self.results, key=lambda r: sort_key(r.key)):
            table.setdefault(result.key, {})[result.backend] = result
        return table

    def backends(self) -> list[str]:
        """Backends in the run, in the order they were benchmarked."""
        return list(dict.fromkeys(r.backend for r in self.results))


def sort_key(key: tuple) -> tuple:
    pass_, s = key
    return (PASSES.index(pass_) if pass_ in PASSES else len(PASSES), s.dtype, s.head_dim, s.causal,
            s.batch * s.seq_len, s.seq_len, s.batch)


def _result(bench: dict) -> Result | None:
    info = bench.get("extra_info") or {}
    if "backend" not in info or "pass" not in info:
        return None
    if "scenario" in info:  # bench_features.py's (report_features.py reads them): not a grid shape
        return None
    if info.get("kind") == "decode":  # test_decode_speed.py's (report_speed.py reads them)
        return None
    shape = Shape(info["dtype"], info["head_dim"], info["seq_len"], info["batch"], info["heads"],
                  info["causal"])
    return Result(bench["name"], info["backend"], info["pass"], shape, float(info["flops"]),
                  float(bench["stats"]["median"]), info.get("kernel_module"))


def read_json(path: Path) -> dict:
    """A pytest-benchmark JSON file's contents; :class:`RunError` if it is not one."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise RunError(f"cannot read a pytest-benchmark run from {path}: {error}") from None
    if not isinstance(data, dict) or not isinstance(data.get("benchmarks"), list):
        raise RunError(f"{path} is not a pytest-benchmark JSON file (no 'benchmarks' list)")
    return data


def load(path: str | Path) -> Run:
    """Read a pytest-benchmark JSON file; :class:`RunError` if it is not one."""
    path = Path(path)
    return from_data(path, read_json(path))


def from_data(path: Path, data: dict) -> Run:
    """The run in ``data``, a pytest-benchmark JSON file's contents (:func:`read_json`) read from ``path``."""
    results = [r for r in map(_result, data["benchmarks"]) if r is not None]
    return Run(path, data.get("machine_info") or {}, data.get("datetime", "?"), results)


def describe(run: Run) -> str:
    """One line: file, device, kernel module, date."""
    info = run.machine.get("flash_bench") or {}
    versions = ", ".join(f"{k} {info[k]}" for k in ("torch", "triton") if info.get(k))
    return (f"{run.path}: {run.device}; kernel {run.kernel_module}; {run.datetime}"
            + (f"; {versions}" if versions else ""))
