"""The deployment's own images (deploy/compose, deploy/kubernetes): the server,
`orsbox/server:latest` (the top-level Dockerfile), built so that nothing inside the
build needs the network, the router, `orsbox/router:latest` (Debian's HAProxy), and
the image registry, `orsbox/registry:latest` (Debian's docker-registry).

Machines like these have no registry and no HTTPS to PyPI inside containers, but pip on
the host reaches its mirrors. So `orsbox build --server` makes the wheels on the host
(`pip wheel` of this checkout, its dependencies and pip itself) into a copy of the build
context, and the Dockerfile installs them with `--no-index` on a base that has only
python3: `$BASE_IMAGE`, else the local Debian base (`orsbox/debian:bookworm`, made by
scripts/make-local-base.sh). Wheels carry their ABI (cp311), so the base's Python must
be the host's minor version; bookworm's is 3.11.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from orsbox.bundle import CHECKOUT, root_base
from orsbox.errors import ImageBuildError
from orsbox.sandbox.guest.sleeper import SHIPPED_NAME
from orsbox.sandbox.images import LOCAL_DEBIAN, BuildLog, ImageRecipe

SERVER_IMAGE = "orsbox/server:latest"
ROUTER_IMAGE = "orsbox/router:latest"
ROUTER_FOLDER = CHECKOUT / "deploy" / "router"
REGISTRY_IMAGE = "orsbox/registry:latest"
REGISTRY_FOLDER = CHECKOUT / "deploy" / "registry"
CONTEXT = (
    "Dockerfile",
    "pyproject.toml",
    "setup.py",
    "README.md",
    "orsbox",
    "environments",
    "images",
)
LOCAL_DEBIAN_PYTHON = (3, 11)  # bookworm's python3
WHEELS_TIMEOUT_S = 600
WHEEL_EPOCH = "315532800"  # 1980-01-01, the oldest time a zip file can hold


def router_recipe() -> ImageRecipe:
    """HAProxy from Debian's package on the same base (apt reaches Debian's mirror)."""
    dockerfile = ROUTER_FOLDER / "Dockerfile"
    return ImageRecipe(ROUTER_IMAGE, ROUTER_FOLDER, dockerfile, root_base(), str(dockerfile))


def registry_recipe() -> ImageRecipe:
    """Debian's docker-registry on the same base (orsbox.cluster.registry's program)."""
    dockerfile = REGISTRY_FOLDER / "Dockerfile"
    return ImageRecipe(REGISTRY_IMAGE, REGISTRY_FOLDER, dockerfile, root_base(), str(dockerfile))


def server_recipe(folder: Path, log: BuildLog, checkout: Path = CHECKOUT) -> ImageRecipe:
    """Fill `folder` with the build context (the checkout's files and `wheels/`) and
    return the recipe that builds the server image from it."""
    base = root_base()
    if base == LOCAL_DEBIAN and sys.version_info[:2] != LOCAL_DEBIAN_PYTHON:
        here, there = (".".join(map(str, v)) for v in (sys.version_info[:2], LOCAL_DEBIAN_PYTHON))
        raise ImageBuildError(
            f"the wheels made here are for Python {here}, but {LOCAL_DEBIAN} has Python "
            f"{there}: run `orsbox build --server` with Python {there}, or set BASE_IMAGE "
            "to an image with this Python"
        )
    copy_checkout(checkout, folder)
    make_wheels(checkout, folder / "wheels", log)
    dockerfile = folder / "Dockerfile"
    return ImageRecipe(SERVER_IMAGE, folder, dockerfile, base, str(checkout), network_mode="none")


def wheel_ships_sleeper(wheels: Path) -> bool:
    """Whether orsbox's wheel in `wheels/orsbox/` holds the native sleeper prebuilt
    (setup.py, where the host has musl-gcc): the image has no compiler to build it."""
    shipped = f"orsbox/sandbox/guest/sleeper/{SHIPPED_NAME}"
    for wheel in (wheels / "orsbox").glob("orsbox-*.whl"):
        with zipfile.ZipFile(wheel) as archive:
            if shipped in archive.namelist():
                return True
    return False


def copy_checkout(checkout: Path, folder: Path) -> None:
    """What the Dockerfile copies (its PyPI path builds from the sources), without the
    checkout's byte code and build leftovers."""
    missing = [name for name in CONTEXT if not (checkout / name).exists()]
    if missing:
        raise ImageBuildError(
            f"{checkout} has no {', '.join(missing)}: `orsbox build --server` builds from a "
            "checkout of the orsbox repository (pip install -e .)"
        )
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for name in CONTEXT:
        source = checkout / name
        if source.is_dir():
            shutil.copytree(source, folder / name, ignore=ignore)
        else:
            shutil.copy2(source, folder / name)


def make_wheels(checkout: Path, wheels: Path, log: BuildLog) -> None:
    """`pip wheel` of the checkout (dependencies included) and of pip itself, which the
    build runs from its wheel: the local base has python3 but no pip. orsbox's own wheel
    goes to `wheels/orsbox/`, so the dependencies' layer stays cached while only orsbox
    changes; SOURCE_DATE_EPOCH makes that wheel the same bytes when its files are."""
    command = [sys.executable, "-m", "pip", "wheel", "--wheel-dir", str(wheels)]
    command += ["--disable-pip-version-check", str(checkout), "pip"]
    env = {**os.environ, "SOURCE_DATE_EPOCH": WHEEL_EPOCH}
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=WHEELS_TIMEOUT_S, env=env
        )
    except subprocess.TimeoutExpired:
        raise ImageBuildError(f"pip wheel took over {WHEELS_TIMEOUT_S}s") from None
    for line in done.stdout.splitlines():
        log(line)
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-15:])
        raise ImageBuildError(f"pip wheel of {checkout} failed:\n{tail}")
    (wheels / "orsbox").mkdir()
    for own in wheels.glob("orsbox-*.whl"):
        own.rename(wheels / "orsbox" / own.name)
