"""Labels on sandboxes, written so that every backend can carry them.

A backend puts `SandboxSpec.labels` and its own owner labels on what it starts (Docker:
container labels; a pod-per-session backend: the pod's labels). Kubernetes has the
strictest rules, so every label follows them:

- a key is `name` or `prefix/name`: the name at most 63 characters of `[A-Za-z0-9._-]`,
  beginning and ending with a letter or digit; the prefix a DNS subdomain of at most 253;
- a value is empty, or at most 63 characters of `[A-Za-z0-9._-]`, beginning and ending
  with a letter or digit.

Keys are constants in code, so a bad one is a programming error (`check_label_key`
raises). Values are data (a session id, a host name, an environment's name), so
`label_value` writes any text as a valid value: characters outside the set become `_`,
the ends are trimmed to a letter or digit, and a value cut to fit keeps a short digest
of the whole so two long texts stay apart. A backend comparing a label with a text it
holds (its own server id) compares with `label_value(text)`.
"""

from __future__ import annotations

import hashlib
import re

MAX_NAME = 63
MAX_PREFIX = 253
NAME = re.compile(r"[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?")
DNS_LABEL = re.compile(r"[a-z0-9]([a-z0-9-]*[a-z0-9])?")
_OUTSIDE = re.compile(r"[^A-Za-z0-9._-]+")
_DIGEST = 8  # hex digits kept of a cut value's sha256


def is_label_name(text: str) -> bool:
    """A label value, or the name part of a key (the empty value aside)."""
    return len(text) <= MAX_NAME and NAME.fullmatch(text) is not None


def check_label_key(key: str) -> str:
    """`key` when it is a valid label key; ValueError naming the rule otherwise."""
    prefix, _, name = key.rpartition("/")
    if not is_label_name(name):
        raise ValueError(
            f"label key {key!r}: the name must be 1-{MAX_NAME} characters of "
            "[A-Za-z0-9._-], beginning and ending with a letter or digit"
        )
    if "/" in key and not _is_dns_subdomain(prefix):
        raise ValueError(f"label key {key!r}: the prefix must be a DNS subdomain")
    return key


def label_value(text: str) -> str:
    """`text` as a valid label value (unchanged when it is one already)."""
    if text == "" or is_label_name(text):
        return text
    cleaned = _OUTSIDE.sub("_", text).strip("._-")
    if cleaned and is_label_name(cleaned):
        return cleaned
    digest = hashlib.sha256(text.encode()).hexdigest()[:_DIGEST]
    head = cleaned[: MAX_NAME - _DIGEST - 1].rstrip("._-")
    return f"{head}-{digest}" if head else digest


def check_labels(labels: dict[str, str]) -> dict[str, str]:
    """`labels` with every value made valid; ValueError for an invalid key."""
    return {check_label_key(key): label_value(value) for key, value in labels.items()}


def _is_dns_subdomain(text: str) -> bool:
    return 0 < len(text) <= MAX_PREFIX and all(
        len(part) <= MAX_NAME and DNS_LABEL.fullmatch(part) for part in text.split(".")
    )
