"""Image maps: exact and prefix rules, normal forms, the environment variable, FROM lines."""

from __future__ import annotations

import pytest

from orsbox.sandbox.fake import FakeBackend
from orsbox.sandbox.image_map import ImageMap, ImageMapError, normalize
from orsbox.server.sandbox_api import SandboxManager
from orsbox.settings import Settings


def test_normal_form() -> None:
    assert normalize("ubuntu") == "docker.io/library/ubuntu:latest"
    assert normalize("ubuntu:24.04") == "docker.io/library/ubuntu:24.04"
    assert normalize("swebench/sweb.eval.x86_64.a_1776_b") == (
        "docker.io/swebench/sweb.eval.x86_64.a_1776_b:latest"
    )
    assert normalize("localhost:5000/x/y:1") == "localhost:5000/x/y:1"
    assert normalize("ghcr.io/a/b@sha256:ab") == "ghcr.io/a/b@sha256:ab"


def test_exact_rules_match_every_spelling_of_one_image() -> None:
    images = ImageMap.parse(["ubuntu:24.04=orsbox/debian:bookworm"])
    for spelling in ("ubuntu:24.04", "library/ubuntu:24.04", "docker.io/library/ubuntu:24.04"):
        assert images.rewrite(spelling) == "orsbox/debian:bookworm"
    assert images.rewrite("ubuntu:22.04") == "ubuntu:22.04"
    assert images.rewrite("ubuntu") == "ubuntu"


def test_prefix_rules_and_first_match_wins() -> None:
    images = ImageMap.parse(
        [
            "swebench/sweb.eval.x86_64.special:latest=mine/special",
            "swebench/=registry.local:5000/mirror/",
        ]
    )
    assert images.rewrite("swebench/sweb.eval.x86_64.special") == "mine/special"
    assert images.rewrite("swebench/sweb.eval.x86_64.a_1776_b:latest") == (
        "registry.local:5000/mirror/sweb.eval.x86_64.a_1776_b:latest"
    )
    assert images.rewrite("docker.io/swebench/x:1") == "registry.local:5000/mirror/x:1"
    assert images.rewrite("other/x:1") == "other/x:1"


def test_environment_rules_come_after_options(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ORSBOX_IMAGE_MAP", "a=b, c=d;e=f")
    images = ImageMap.from_env(["a=z"])
    assert [images.rewrite(x) for x in ("a", "c", "e")] == ["z", "d", "f"]


@pytest.mark.parametrize("rule", ["nothing", "=x", "x=", " = "])
def test_a_bad_rule_is_named(rule: str) -> None:
    with pytest.raises(ImageMapError, match="is not FROM=TO"):
        ImageMap.parse([rule])


def test_dockerfile_from_lines() -> None:
    images = ImageMap.parse(["ubuntu:24.04=orsbox/debian:bookworm", "python:3.12=py/local"])
    text = (
        "ARG V=1\n"
        "FROM --platform=linux/amd64 ubuntu:24.04 AS build\n"
        "RUN echo FROM ubuntu:24.04\n"
        "from python:3.12\r\n"
        "FROM build\n"
        "FROM ${BASE}\n"
        "FROM scratch\n"
    )
    assert images.rewrite_dockerfile(text) == (
        "ARG V=1\n"
        "FROM --platform=linux/amd64 orsbox/debian:bookworm AS build\n"
        "RUN echo FROM ubuntu:24.04\n"
        "from py/local\r\n"
        "FROM build\n"
        "FROM ${BASE}\n"
        "FROM scratch\n"
    )


def test_a_map_applies_once_even_when_its_rules_chain() -> None:
    """The first rule that matches is the whole rewrite: its target is not mapped again
    by a later rule (the sandbox API's one map on a real engine:
    tests/sandbox_api/test_metered.py)."""
    rules = ["orsbox/chained:1=orsbox/base:latest", "orsbox/base:latest=orsbox/missing:1"]
    images = ImageMap.parse(rules)
    assert images.rewrite("orsbox/chained:1") == "orsbox/base:latest"
    assert images.rewrite("orsbox/base:latest") == "orsbox/missing:1"
    manager = SandboxManager(Settings(image_map=rules), FakeBackend())
    assert manager.images.texts() == rules  # the sandbox API's one map, read at startup
    assert manager.images.rewrite("orsbox/chained:1") == "orsbox/base:latest"
