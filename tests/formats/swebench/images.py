"""The test instance images, built locally in the official layout (no registry here):
`image/Dockerfile` on the local Debian base, plus small variants for the families whose
images differ. All are tagged `orsbox-test/...`, labelled, and removed after the session."""

from __future__ import annotations

import os
import shlex
import subprocess
from functools import cache
from pathlib import Path

BASE_IMAGE = "orsbox/debian:bookworm"
# Tags are the engine's, shared by every test run on it: a run that must not see another
# checkout's images (or lose them to its clean-up) names its own prefix.
PREFIX = os.environ.get("ORSBOX_TEST_SWE_PREFIX", "orsbox-test")
CALC = f"{PREFIX}/swebench-calc:base"
SMITH = f"{PREFIX}/swebench-calc:smith"
REBENCH = f"{PREFIX}/swebench-calc:rebench"
R2E = f"{PREFIX}/swebench-calc:r2e"
INSTALLABLE = f"{PREFIX}/swebench-calc:installable"
SMITH_BRANCH = "calc__calc.0000aaaa.func_pm_op_swap__ab12"
# the names the official conventions give the v4 and SWE-Gym rows, after the image map
OFFICIAL = f"{PREFIX}/sweb.eval.x86_64.pytest-dev_1776_pytest-1:latest"
GYM = f"{PREFIX}/sweb.eval.x86_64.calc-org_s_calc-7:latest"
OFFICIAL_INSTALLABLE = f"{PREFIX}/sweb.eval.x86_64.pytest-dev_1776_pytest-2:latest"
IMAGE_MAP = [f"swebench/={PREFIX}/", f"xingyaoww/={PREFIX}/"]
LABEL = "orsbox-test=swebench"
BUILD_TIMEOUT_S = 1200

# the installable variant's packaging: an isolated build asks pip for setuptools and wheel
PYPROJECT = """[build-system]
requires = ["setuptools>=61", "wheel"]
build-backend = "setuptools.build_meta"

[project]
name = "calc"
version = "1.0"

[tool.setuptools]
packages = ["calc"]
"""

VARIANTS = {
    # SWE-smith: the bug on a branch named by the instance, HEAD back on main
    SMITH: f"""FROM {CALC}
RUN git checkout -q -b {SMITH_BRANCH} && sed -i 's|return a / b|return a * b|' calc/ops.py \\
    && git -c user.name=t -c user.email=t@t commit -qam bug && git checkout -q main
""",
    # SWE-rebench V2: the repository wherever the image's WORKDIR says, no conda
    REBENCH: f"""FROM {CALC}
RUN cp -a /testbed /work && rm -rf /testbed /opt/miniconda3
WORKDIR /work
""",
    # R2E-Gym: hidden tests in /r2e_tests, run by /testbed/run_tests.sh
    R2E: f"""FROM {CALC}
RUN mkdir /r2e_tests && printf '%s\\n' 'from calc.ops import div' '' 'def test_div():' \\
    '    assert div(6, 3) == 2' '' 'def test_div_zero():' '    import pytest' \\
    '    with pytest.raises(ValueError):' '        div(1, 0)' > /r2e_tests/test_hidden.py \\
    && printf '%s\\n' 'python3 -m pytest -rA r2e_tests' > /testbed/run_tests.sh
""",
    # An installed package, as in the official images: a conda-like environment (a venv
    # that `conda activate testbed` puts first on PATH) with the repository installed
    # editable from a pyproject.toml that asks for an isolated build (setuptools, wheel).
    INSTALLABLE: f"""FROM {CALC}
RUN apt-get update && apt-get install -y --no-install-recommends python3-venv python3-wheel \\
    && rm -rf /var/lib/apt/lists/* \\
    && python3 -m venv --system-site-packages /opt/miniconda3/envs/testbed \\
    && printf '%s\\n' 'conda() {{ export PATH=/opt/miniconda3/envs/testbed/bin:$PATH; }}' \\
        > /opt/miniconda3/bin/activate \\
    && printf '%s\\n' {" ".join(shlex.quote(line) for line in PYPROJECT.splitlines())} \\
        > pyproject.toml \\
    && git -c user.name=t -c user.email=t@t add pyproject.toml \\
    && git -c user.name=t -c user.email=t@t commit -qm 'calc: packaging' \\
    && /opt/miniconda3/envs/testbed/bin/pip install -q --no-build-isolation --no-index -e . \\
    && rm -rf calc.egg-info build
""",
}


def _docker(*args: str, stdin: str | None = None) -> str:
    done = subprocess.run(
        ["docker", *args], input=stdin, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S
    )
    assert done.returncode == 0, f"docker {args[0]} failed: {done.stderr[-3000:]}"
    return done.stdout


def build_all() -> list[str]:
    """Build (from the engine's cache when unchanged) and tag every test image."""
    folder = Path(__file__).parent / "image"
    _docker(
        "build",
        "-q",
        "--label",
        LABEL,
        "--build-arg",
        f"BASE_IMAGE={BASE_IMAGE}",
        "-t",
        CALC,
        str(folder),
    )
    for tag, dockerfile in VARIANTS.items():
        _docker("build", "-q", "--label", LABEL, "-t", tag, "-", stdin=dockerfile)
    for alias in (OFFICIAL, GYM):
        _docker("tag", CALC, alias)
    _docker("tag", INSTALLABLE, OFFICIAL_INSTALLABLE)
    return [CALC, *VARIANTS, OFFICIAL, GYM, OFFICIAL_INSTALLABLE]


def remove_all(tags: list[str]) -> None:
    """Remove the tags, then the untagged layers our builds left (only ours: by label)."""
    for tag in reversed(tags):
        subprocess.run(["docker", "rmi", tag], capture_output=True, timeout=120)
    prune = ["docker", "image", "prune", "-f", "--filter", f"label={LABEL}"]
    subprocess.run(prune, capture_output=True, timeout=300)


@cache
def image_head(image: str = CALC) -> str:
    out = _docker(
        "run", "--rm", "--label", LABEL, image, "git", "-C", "/testbed", "rev-parse", "HEAD"
    )
    return out.strip()
