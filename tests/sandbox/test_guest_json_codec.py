"""The guest's JSON headers (`guest/inside/json_codec.py`, json's C core without the
`json` package) read and write exactly what `json` does: the host uses `json` itself on
its side of every frame."""

from __future__ import annotations

import json
import math
import random
from typing import Any

import pytest

from orsbox.sandbox.guest.inside import json_codec

TEXTS = ["", "a b", "é☃😀", '\x00\n"\\\t\x7f', "\ud800"]  # the last: a lone surrogate
NUMBERS = [0, -1, 10**20, 1.5, -0.0, 1e-7, 1e300, math.inf, -math.inf]


def value(rng: random.Random, depth: int = 0) -> Any:
    """A random JSON value of the kinds headers hold."""
    kind = rng.randrange(7 if depth < 3 else 4)
    if kind == 0:
        return rng.choice(TEXTS) + str(rng.random())
    if kind == 1:
        return rng.choice([*NUMBERS, rng.randint(-(2**70), 2**70), rng.uniform(-1e6, 1e6)])
    if kind == 2:
        return rng.choice([None, True, False])
    if kind == 3:
        return rng.choice(TEXTS)
    if kind == 4:
        return [value(rng, depth + 1) for _ in range(rng.randrange(4))]
    return {rng.choice(TEXTS) + str(n): value(rng, depth + 1) for n in range(rng.randrange(4))}


def test_a_thousand_values_encode_and_decode_as_json_does() -> None:
    rng = random.Random(36)
    for _ in range(1000):
        item = value(rng)
        assert json_codec.dumps(item) == json.dumps(item)
        for text in (json.dumps(item), json.dumps(item, ensure_ascii=False)):
            assert json_codec.loads(text) == item
    assert math.isnan(json_codec.loads(json.dumps(math.nan)))
    assert json_codec.dumps(math.nan) == "NaN" == json.dumps(math.nan)


@pytest.mark.parametrize("text", ["", "{", '{"a": 1} x', '{"a": }', "nan", "[1,]"])
def test_what_json_refuses_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        json.loads(text)
    with pytest.raises(ValueError):
        json_codec.loads(text)


def test_what_json_cannot_write_is_refused() -> None:
    with pytest.raises(TypeError):
        json_codec.dumps({"a": object()})
