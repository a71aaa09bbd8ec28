"""The test instance images, built locally in the official layout (no registry here):
`image/Dockerfile` on the local Debian base, plus small variants for the families whose
images differ. All are tagged `orsbox-test/...`, labelled, and removed after the session."""

from __future__ import annotations

import subprocess
from functools import cache
from pathlib import Path

BASE_IMAGE = "orsbox/debian:bookworm"
CALC = "orsbox-test/swebench-calc:base"
SMITH = "orsbox-test/swebench-calc:smith"
REBENCH = "orsbox-test/swebench-calc:rebench"
R2E = "orsbox-test/swebench-calc:r2e"
SMITH_BRANCH = "calc__calc.0000aaaa.func_pm_op_swap__ab12"
# the names the official conventions give the v4 and SWE-Gym rows, after the image map
OFFICIAL = "orsbox-test/sweb.eval.x86_64.pytest-dev_1776_pytest-1:latest"
GYM = "orsbox-test/sweb.eval.x86_64.calc-org_s_calc-7:latest"
IMAGE_MAP = ["swebench/=orsbox-test/", "xingyaoww/=orsbox-test/"]
LABEL = "orsbox-test=swebench"
BUILD_TIMEOUT_S = 1200

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
    return [CALC, *VARIANTS, OFFICIAL, GYM]


def remove_all(tags: list[str]) -> None:
    """Remove the tags, then the untagged layers our builds left (only ours: by label)."""
    for tag in reversed(tags):
        subprocess.run(["docker", "rmi", tag], capture_output=True, timeout=120)
    prune = ["docker", "image", "prune", "-f", "--filter", f"label={LABEL}"]
    subprocess.run(prune, capture_output=True, timeout=300)


@cache
def image_head() -> str:
    out = _docker(
        "run", "--rm", "--label", LABEL, CALC, "git", "-C", "/testbed", "rev-parse", "HEAD"
    )
    return out.strip()
