"""Instance images made here for the registry tests and `python -m bench --parts images`:
the SWE-bench test instance image (tests/formats/swebench: the calc repository at
/testbed in the official layout) plus a layer of random bytes, so each is a distinct
image of a chosen size that a SWE-bench episode can really run in, and a SWE-bench 5
dataset naming them, one instance per image. Everything is labelled with the run's
token and removed by `remove`."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.formats.swebench import dataset, images

LABEL = "orsbox-test.instances"
BUILD_TIMEOUT_S = 600


def build_calc() -> str:
    """The SWE-bench test image (its build is cached by the engine)."""
    folder = Path(images.__file__).parent / "image"
    argv = ["docker", "build", "-q", "--label", images.LABEL]
    argv += ["--build-arg", f"BASE_IMAGE={images.BASE_IMAGE}", "-t", images.CALC, str(folder)]
    subprocess.run(argv, check=True, capture_output=True, timeout=BUILD_TIMEOUT_S)
    return images.CALC


def build(token: str, count: int, size_mb: int, prefix: str = "orsbox-test") -> list[str]:
    """`count` images `<prefix>/inst-<token>-<n>:1`, each the calc image with its own
    `size_mb` of random bytes (incompressible: a push and a pull move all of it)."""
    calc = build_calc()
    names = []
    for n in range(count):
        name = f"{prefix}/inst-{token}-{n}:1"
        dockerfile = (
            f"FROM {calc}\nLABEL {LABEL}={token}\nRUN head -c {size_mb}M /dev/urandom > /blob-{n}\n"
        )
        argv = ["docker", "build", "-q", "-t", name, "-"]
        subprocess.run(
            argv,
            input=dockerfile.encode(),
            check=True,
            capture_output=True,
            timeout=BUILD_TIMEOUT_S,
        )
        names.append(name)
    return names


def instance_id(n: int) -> str:
    return f"calc__calc-{100 + n}"


def write_dataset(path: Path, names: list[str]) -> Path:
    """A SWE-bench 5 dataset: instance `instance_id(n)` runs in `names[n]`."""
    row = dataset.v5_row("")
    rows = [{**row, "instance_id": instance_id(n), "image": name} for n, name in enumerate(names)]
    return dataset.write_jsonl(path, rows)


def remove(token: str) -> None:
    """Every image of this run on the machine's engine (by its label)."""
    found = subprocess.run(
        ["docker", "images", "-q", "--filter", f"label={LABEL}={token}"],
        capture_output=True, text=True, check=False,
    ).stdout.split()  # fmt: skip
    if found:
        subprocess.run(["docker", "rmi", "-f", *set(found)], capture_output=True, check=False)
