"""Text helpers: URL slugs, truncation, word counts."""

from __future__ import annotations

import re
import unicodedata


def slugify(text: str, separator: str = "-") -> str:
    """A URL slug: ASCII letters and digits in lower case, words joined by `separator`.

    Accents are dropped ("Crème brûlée" -> "creme-brulee") and every run of other
    characters becomes one separator.
    """
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    words = re.split(r"[^a-z0-9]", ascii_text.lower())
    return separator.join(words)


def truncate(text: str, width: int, placeholder: str = "...") -> str:
    """`text` cut to at most `width` characters, ending in `placeholder` when cut."""
    if width < len(placeholder):
        raise ValueError(f"width {width} is shorter than the placeholder {placeholder!r}")
    if len(text) <= width:
        return text
    return text[: width - len(placeholder)].rstrip() + placeholder


def word_count(text: str) -> dict[str, int]:
    """How often each word occurs, case-insensitively; words are runs of letters,
    digits and apostrophes."""
    counts: dict[str, int] = {}
    for word in re.findall(r"[\w']+", text.lower()):
        counts[word] = counts.get(word, 0) + 1
    return counts
