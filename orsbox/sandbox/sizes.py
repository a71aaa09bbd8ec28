"""Sizes as an operator writes them ("512m", "40G", "1.5GiB"), in bytes: one reading for
a manifest's limits and a server's budgets."""

from __future__ import annotations

import re

SIZE_UNITS = {"": 1, "b": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}


def parse_size(value: int | str) -> int:
    """Bytes from an int or a docker-style size: "512m", "2g", "1GiB", "1.5g"."""
    if isinstance(value, int):
        if value <= 0:
            raise ValueError("must be positive")
        return value
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([bkmgt]?)(?:i?b)?\s*", value.lower())
    if not match:
        raise ValueError(f"{value!r} is not a size; write bytes or e.g. 512m, 2g")
    size = int(float(match.group(1)) * SIZE_UNITS[match.group(2)])
    if size <= 0:
        raise ValueError("must be positive")
    return size
