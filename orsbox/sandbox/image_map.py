"""Image maps: rewrite image references for private registries and machines without one.

Benchmarks name their images as published (`swebench/sweb.eval.x86_64.django_1776_django-11099`,
`FROM ubuntu:24.04`, Harbor's `docker_image`). A user behind a private registry, or on a
machine with no registry at all, needs other names without editing thousands of dataset
rows or Dockerfiles. An `ImageMap` is an ordered list of `FROM=TO` rules, given as
repeated `--image-map` options or in `ORSBOX_IMAGE_MAP` (rules separated by commas,
semicolons or whitespace):

    ubuntu:24.04=orsbox/debian:bookworm        one image for another
    swebench/=registry.example:5000/swebench/   every image under a prefix (FROM ends in /)

References are compared in docker's normal form, so `ubuntu:24.04`,
`library/ubuntu:24.04` and `docker.io/library/ubuntu:24.04` are one image and a missing
tag is `latest`. The first rule that matches wins; an unmatched reference is unchanged.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

ENV_VAR = "ORSBOX_IMAGE_MAP"
DEFAULT_REGISTRY = "docker.io"

_RULE_SEPARATORS = re.compile(r"[,;\s]+")
# FROM [--platform=...] image [AS name]; the image may use build args, left alone.
_FROM_LINE = re.compile(r"^(\s*FROM\s+(?:--\S+\s+)*)(\S+)(.*)$", re.IGNORECASE)


class ImageMapError(ValueError):
    """A rule that is not `FROM=TO` (the message names the rule)."""


def normalize(reference: str) -> str:
    """Docker's full form of a reference: registry, `library/` for official images,
    and a tag (`latest` when none and no digest)."""
    name, digest = reference.split("@", 1) if "@" in reference else (reference, "")
    first, _, rest = name.partition("/")
    if not rest or ("." not in first and ":" not in first and first != "localhost"):
        name = f"{DEFAULT_REGISTRY}/{name if rest else 'library/' + name}"
    last = name.rsplit("/", 1)[-1]
    if not digest and ":" not in last:
        name += ":latest"
    return f"{name}@{digest}" if digest else name


def _short(reference: str) -> str:
    """The shortest name docker accepts for a normal form (what `docker images` shows)."""
    for prefix in (f"{DEFAULT_REGISTRY}/library/", f"{DEFAULT_REGISTRY}/"):
        if reference.startswith(prefix):
            return reference[len(prefix) :]
    return reference


@dataclass(frozen=True)
class ImageRule:
    source: str
    target: str

    @property
    def is_prefix(self) -> bool:
        return self.source.endswith("/")

    def apply(self, reference: str) -> str | None:
        """The rewritten reference, or None when this rule does not match."""
        if not self.is_prefix:
            return self.target if normalize(reference) == normalize(self.source) else None
        # as typed (`swebench/`) or in normal form (`docker.io/swebench/`)
        normal_prefix = normalize(self.source + "x").removesuffix("x:latest")
        for prefix, candidate in ((self.source, reference), (normal_prefix, normalize(reference))):
            if candidate.startswith(prefix):
                return self.target + candidate[len(prefix) :]
        return None


class ImageMap:
    """Ordered `FROM=TO` rules; `rewrite` applies the first that matches."""

    def __init__(self, rules: Iterable[ImageRule] = ()) -> None:
        self.rules = tuple(rules)

    def __bool__(self) -> bool:
        return bool(self.rules)

    def __repr__(self) -> str:
        return f"ImageMap({', '.join(f'{r.source}={r.target}' for r in self.rules)})"

    @classmethod
    def parse(cls, rules: Sequence[str]) -> ImageMap:
        parsed = []
        for text in rules:
            source, sep, target = text.strip().partition("=")
            if not sep or not source.strip() or not target.strip():
                raise ImageMapError(f"image map rule {text!r} is not FROM=TO")
            parsed.append(ImageRule(source.strip(), target.strip()))
        return cls(parsed)

    @classmethod
    def from_env(cls, extra: Sequence[str] = ()) -> ImageMap:
        """`extra` rules (command-line options) first, then `ORSBOX_IMAGE_MAP`'s."""
        return cls.parse([*extra, *cls.split(os.environ.get(ENV_VAR, ""))])

    @staticmethod
    def split(text: str) -> list[str]:
        """The rules of `ORSBOX_IMAGE_MAP`'s format (commas, semicolons or whitespace)."""
        return [rule for rule in _RULE_SEPARATORS.split(text) if rule]

    def texts(self) -> list[str]:
        """The rules as `FROM=TO` texts, in order (what `parse` reads back)."""
        return [f"{rule.source}={rule.target}" for rule in self.rules]

    def rewrite(self, reference: str) -> str:
        for rule in self.rules:
            mapped = rule.apply(reference)
            if mapped is not None:
                return _short(mapped) if mapped.startswith(DEFAULT_REGISTRY + "/") else mapped
        return reference

    def rewrite_dockerfile(self, text: str) -> str:
        """The Dockerfile with every `FROM` image rewritten (stage names, `scratch` and
        build-arg references are left alone)."""
        stages: set[str] = set()
        lines = []
        for line in text.splitlines(keepends=True):
            match = _FROM_LINE.match(line.rstrip("\r\n"))
            if match:
                head, image, tail = match.groups()
                if image.lower() not in stages and image != "scratch" and "$" not in image:
                    newline = line[len(line.rstrip("\r\n")) :]
                    line = f"{head}{self.rewrite(image)}{tail}{newline}"
                stage = re.search(r"\bAS\s+(\S+)", tail, re.IGNORECASE)
                if stage:
                    stages.add(stage.group(1).lower())
            lines.append(line)
        return "".join(lines)
