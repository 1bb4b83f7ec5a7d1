"""`jaxseeker bench sandbox`: what isolation costs a python tool call, against the plain subprocess it replaces.

Each isolation runs `print(1)` through `run_python` `--calls` times, one after another; the median and the 90th
percentile of the wall time per call are printed, for isolation none (a plain subprocess) and for each back-end
that works here (a back-end that does not is listed with the reason).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from jaxseeker.argtypes import at_least


def measure(isolation: str, calls: int, interpreter: str = "") -> dict[str, float | str]:
    """Median and p90 wall seconds of `run_python("print(1)")` under `isolation`, or the reason it cannot run."""
    from jaxseeker.tools import sandbox, sandbox_probe
    from jaxseeker.tools.python_exec import PythonConfig, run_python

    config = PythonConfig(isolation=isolation, interpreter=interpreter)
    try:
        box = sandbox_probe.resolve(isolation, interpreter)
    except sandbox.SandboxUnavailable as exc:
        return {"unavailable": str(exc)}
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        text = run_python("print(1)", config, box)
        times.append(time.perf_counter() - start)
        if text != "stdout:\n1":
            raise RuntimeError(f"isolation {isolation}: print(1) gave {text!r}")
    return {"median_s": statistics.median(times), "p90_s": statistics.quantiles(times, n=10, method="inclusive")[-1]}


def _bench(args: argparse.Namespace) -> int:
    import logging

    logging.getLogger("jaxseeker.tools.sandbox").setLevel(logging.ERROR)  # isolation none warns every call
    result = {isolation: measure(isolation, args.calls, args.interpreter) for isolation in ("none", "bwrap", "unshare")}
    if args.json:
        print(json.dumps(result))
        return 0
    for isolation, row in result.items():
        if "unavailable" in row:
            print(f"{isolation:<8} unavailable: {row['unavailable']}")
        else:
            print(f"{isolation:<8} median {row['median_s'] * 1e3:7.1f} ms   p90 {row['p90_s'] * 1e3:7.1f} ms")
    return 0


def add_bench_parser(bench_subparsers: argparse._SubParsersAction) -> None:
    """Add `bench sandbox` to the `jaxseeker bench` group."""
    p = bench_subparsers.add_parser("sandbox", help="wall time of a python tool call: plain subprocess, bwrap, unshare")
    p.add_argument("--calls", type=at_least(2), default=30, help="calls per isolation (median and p90 over them)")
    p.add_argument("--interpreter", default="", help="the Python the code runs in (default: jaxseeker's)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=_bench)
