"""Labels every backend can carry (`orsbox.sandbox.labels`): Kubernetes' rules for keys
and values, any text written as a valid value, and a spec's labels held to them."""

from __future__ import annotations

import re

import pytest

from orsbox.sandbox import SandboxSpec
from orsbox.sandbox.labels import MAX_NAME, check_label_key, label_value

# Kubernetes' own expressions (k8s.io/apimachinery/pkg/util/validation)
K8S_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
K8S_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def kubernetes_takes_value(value: str) -> bool:
    return len(value) <= MAX_NAME and K8S_VALUE.fullmatch(value) is not None


def kubernetes_takes_key(key: str) -> bool:
    prefix, _, name = key.rpartition("/")
    ok_prefix = "/" not in key or (len(prefix) <= 253 and K8S_SUBDOMAIN.fullmatch(prefix))
    return bool(name) and kubernetes_takes_value(name) and bool(ok_prefix)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "pool",
        "3f2a9c1e-7b7d-4c55-9a8e-1f0f3c7d2b11.cell-1",
        "sandbox:-",
        "harbor:hello-world",
        "pid:[4026531836]",
        "a" * 64,
        "x" * 30 + ":" + "y" * 80,
        "::",
        "-leading-and-trailing-",
        "ünïcödé task",
    ],
)
def test_any_text_becomes_a_value_kubernetes_takes(text: str) -> None:
    value = label_value(text)
    assert kubernetes_takes_value(value), value
    assert label_value(value) == value  # a valid value is kept as it is
    assert (value == text) == kubernetes_takes_value(text)


def test_long_texts_stay_apart_once_cut() -> None:
    a, b = "session-" + "x" * 70 + "-a", "session-" + "x" * 70 + "-b"
    assert label_value(a) != label_value(b)
    assert len(label_value(a)) == MAX_NAME and label_value(a).startswith("session-xxx")


@pytest.mark.parametrize(
    ("key", "valid"),
    [
        ("orsbox", True),
        ("orsbox.session", True),
        ("orsbox.pid_start", True),
        ("orsbox.dev/server", True),
        ("app.kubernetes.io/name", True),
        ("orsbox:session", False),
        ("-orsbox", False),
        ("Orsbox.IO/x", False),
        ("x" * 64, False),
        ("a/b/c", False),
        ("", False),
    ],
)
def test_keys_follow_kubernetes(key: str, valid: bool) -> None:
    assert kubernetes_takes_key(key) == valid
    if valid:
        assert check_label_key(key) == key
    else:
        with pytest.raises(ValueError, match="label key"):
            check_label_key(key)


def test_a_spec_writes_its_label_values_to_fit_and_refuses_a_bad_key() -> None:
    spec = SandboxSpec(image="i", labels={"orsbox.environment": "sandbox:" + "e" * 90})
    [(key, value)] = spec.labels.items()
    assert kubernetes_takes_key(key) and kubernetes_takes_value(value)
    assert value.startswith("sandbox_eee")
    with pytest.raises(ValueError, match="label key"):
        SandboxSpec(image="i", labels={"orsbox:environment": "x"})
