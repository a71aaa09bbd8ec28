"""`python -m bench [--quick] [--parts a,b]`: the whole suite, one table, one JSON file.

Every figure is measured in the same run as its baseline (see each part's docstring),
because absolute timings drift on a shared machine. The JSON (in bench/results/) holds
every figure, the raw distributions, and the load average around each part."""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

from bench import (
    burst,
    cluster,
    coldstart,
    cpu_account,
    create,
    flood,
    fork,
    grpo_group,
    gvisor,
    harbor,
    idle,
    images,
    orphans,
    prepared,
    protocol,
    recording,
    roundtrip,
    scale,
    server_image,
    startlag,
    storage_bound,
    swebench,
    throughput,
)
from bench.harness import Bench, load
from bench.stats import Row, as_json, table

PARTS = {
    "roundtrip": roundtrip,
    "protocol": protocol,
    "throughput": throughput,
    "cpu_account": cpu_account,
    "create": create,
    "harbor": harbor,
    "coldstart": coldstart,
    "burst": burst,
    "idle": idle,
    "flood": flood,
    "swebench": swebench,
    "prepared": prepared,
    "fork": fork,
    "grpo_group": grpo_group,
    "recording": recording,
    "cluster": cluster,
    "images": images,
    "gvisor": gvisor,
    "server_image": server_image,
    "storage_bound": storage_bound,
    "startlag": startlag,
    "orphans": orphans,
    "scale": scale,
}
RESULTS = Path(__file__).resolve().parent / "results"


def machine() -> dict[str, object]:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "commit": commit.stdout.strip(),
        "load_at_start": load(),
        "other_test_runs_at_start": len(other_test_runs()),
    }


def other_test_runs() -> list[str]:
    """pytest processes sharing this machine: their load skews timings, and their
    leftover-container checks may remove this run's containers."""
    found = subprocess.run(["pgrep", "-f", "python.* -m pytest"], capture_output=True, text=True)
    return found.stdout.split()


async def run_parts(bench: Bench, names: list[str]) -> list[Row]:
    rows: list[Row] = []
    bench.raw["load"] = {}
    try:
        for name in names:
            before, started = load(), time.monotonic()
            print(f"-- {name} (load {before})", file=sys.stderr, flush=True)
            rows += await PARTS[name].run(bench)
            bench.raw["load"][name] = {
                "before": before,
                "after": load(),
                "seconds": round(time.monotonic() - started, 1),
            }
    finally:
        await bench.cleanup()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    parser.add_argument("--parts", default=",".join(PARTS), help=f"from: {', '.join(PARTS)}")
    args = parser.parse_args()
    names = [n for n in args.parts.split(",") if n]
    bench = Bench(quick=args.quick)
    if other_test_runs():
        print("warning: test runs share this machine; figures will be noisy", file=sys.stderr)
    info = machine()
    try:
        import uvloop  # the client must not be the bottleneck

        uvloop.install()
    except ImportError:
        pass
    started = time.monotonic()
    rows = asyncio.run(run_parts(bench, names))
    print(table(rows))
    RESULTS.mkdir(exist_ok=True)
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    out = RESULTS / f"bench-{stamp}.json"
    report = {
        "machine": info,
        "quick": args.quick,
        "rows": as_json(rows),
        "seconds": round(time.monotonic() - started, 1),
        **bench.raw,
    }
    out.write_text(json.dumps(report, indent=2, default=str))
    print(f"\n{len(rows)} figures in {report['seconds']} s; load {load()}; written to {out}")


if __name__ == "__main__":
    main()
