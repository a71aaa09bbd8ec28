"""Image recipes and their build order, and what `orsbox serve` targets resolve to."""

from __future__ import annotations

from pathlib import Path

import pytest

from orsbox.bundle import build_plan, bundled_targets, image_recipes
from orsbox.errors import ManifestError
from orsbox.sandbox.images import LOCAL_DEBIAN, ImageRecipe
from orsbox.targets import resolve_targets


def recipe(tag: str, base: str | None) -> ImageRecipe:
    return ImageRecipe(tag, Path("."), Path("Dockerfile"), base)


RECIPES = [
    recipe("orsbox/env-swe:latest", "orsbox/swe:latest"),
    recipe("orsbox/swe:latest", "orsbox/base:latest"),
    recipe("orsbox/base:latest", LOCAL_DEBIAN),
]


def tags(plan: list[ImageRecipe]) -> list[str]:
    return [r.tag for r in plan]


def test_parents_come_first_and_only_missing_ones_are_built() -> None:
    nothing = lambda tag: False  # noqa: E731
    assert tags(build_plan(["orsbox/env-swe:latest"], RECIPES, nothing)) == [
        "orsbox/base:latest",
        "orsbox/swe:latest",
        "orsbox/env-swe:latest",
    ]
    base_exists = lambda tag: tag == "orsbox/base:latest"  # noqa: E731
    assert tags(build_plan(["orsbox/env-swe:latest"], RECIPES, base_exists)) == [
        "orsbox/swe:latest",
        "orsbox/env-swe:latest",
    ]
    everything = lambda tag: True  # noqa: E731
    assert build_plan(["orsbox/env-swe:latest"], RECIPES, everything) == []
    rebuilt = build_plan(["orsbox/swe:latest"], RECIPES, everything, rebuild=True)
    assert tags(rebuilt) == ["orsbox/swe:latest"]
    assert build_plan(["someone/else:1"], RECIPES, nothing) == []


def test_a_cycle_is_an_error() -> None:
    cycle = [recipe("a:1", "b:1"), recipe("b:1", "a:1")]
    with pytest.raises(ManifestError, match="a:1 -> b:1 -> a:1"):
        build_plan(["a:1"], cycle, lambda tag: False)


def test_images_folder_recipes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BASE_IMAGE", raising=False)
    by_tag = {r.tag: r for r in image_recipes()}
    assert by_tag["orsbox/base:latest"].base_image == LOCAL_DEBIAN
    assert by_tag["orsbox/swe:latest"].base_image == "orsbox/base:latest"
    monkeypatch.setenv("BASE_IMAGE", "debian:bookworm-slim")
    assert {r.tag: r for r in image_recipes()}["orsbox/base:latest"].base_image == (
        "debian:bookworm-slim"
    )


def test_no_targets_means_every_bundled_environment() -> None:
    assert [Path(t).name for t in bundled_targets()] == [
        "environment.py",
        "coding",
        "swe",
        "terminal",
    ]
    names = [e.name().lower() for e in resolve_targets([])]
    assert names == ["math", "coding", "swe", "terminal"]  # as `serve --help` lists them
    assert [e.name().lower() for e in resolve_targets(["swe"])] == ["swe"]
