"""`orsbox build --server`'s recipe, without building: the context it assembles, the
base it picks, and that the build gets no network (the wheels are made beforehand)."""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path

import pytest

from orsbox.cluster import images
from orsbox.errors import ImageBuildError
from orsbox.sandbox.guest.sleeper import SHIPPED_NAME
from orsbox.sandbox.images import LOCAL_DEBIAN


def fake_wheels(checkout: Path, wheels: Path, log: object) -> None:
    (wheels / "orsbox").mkdir(parents=True)
    (wheels / "orsbox" / "orsbox-0.1.0-py3-none-any.whl").write_bytes(b"")
    (wheels / "pip-24.0-py3-none-any.whl").write_bytes(b"")


def test_the_server_recipe_builds_offline_on_the_local_base(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("BASE_IMAGE", raising=False)
    monkeypatch.setattr(images, "make_wheels", fake_wheels)
    monkeypatch.setattr(images, "LOCAL_DEBIAN_PYTHON", sys.version_info[:2])
    recipe = images.server_recipe(tmp_path, lambda line: None)
    assert (recipe.tag, recipe.base_image, recipe.network_mode) == (
        "orsbox/server:latest",
        LOCAL_DEBIAN,
        "none",
    )
    assert recipe.dockerfile == tmp_path / "Dockerfile" and recipe.context == tmp_path
    for name in images.CONTEXT:
        assert (tmp_path / name).exists(), name
    assert not list(tmp_path.rglob("__pycache__"))


def test_wheels_for_another_python_than_the_local_bases_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("BASE_IMAGE", raising=False)
    monkeypatch.setattr(images, "make_wheels", fake_wheels)
    monkeypatch.setattr(images, "LOCAL_DEBIAN_PYTHON", (3, 99))
    with pytest.raises(ImageBuildError, match=r"has Python 3\.99"):
        images.server_recipe(tmp_path, lambda line: None)
    monkeypatch.setenv("BASE_IMAGE", "python:3.11-slim")  # the operator's choice: trusted
    (tmp_path / "ctx").mkdir()
    recipe = images.server_recipe(tmp_path / "ctx", lambda line: None)
    assert recipe.base_image == "python:3.11-slim"


def test_an_installed_package_without_a_checkout_is_told_what_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("BASE_IMAGE", raising=False)
    monkeypatch.setattr(images, "LOCAL_DEBIAN_PYTHON", sys.version_info[:2])
    (tmp_path / "site").mkdir()
    with pytest.raises(ImageBuildError, match=r"has no Dockerfile, pyproject\.toml"):
        images.server_recipe(tmp_path / "ctx", lambda line: None, checkout=tmp_path / "site")


def test_the_build_says_when_orsboxs_wheel_ships_no_sleeper(tmp_path: Path) -> None:
    """The image has no compiler: without musl-gcc where the wheel was made, its idle
    guests sleep as bash, which `orsbox build --server` warns of."""
    fake_wheels(tmp_path, tmp_path, None)
    wheel = next((tmp_path / "orsbox").glob("orsbox-*.whl"))
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("orsbox/__init__.py", "")
    assert not images.wheel_ships_sleeper(tmp_path)
    with zipfile.ZipFile(wheel, "a") as archive:
        archive.writestr(f"orsbox/sandbox/guest/sleeper/{SHIPPED_NAME}", b"\x7fELF")
    assert images.wheel_ships_sleeper(tmp_path)
