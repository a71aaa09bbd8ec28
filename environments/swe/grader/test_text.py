"""Hidden tests for toolbox.text (the slugify-punctuation task)."""

import pytest
from toolbox.text import slugify, truncate, word_count


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Hello, World!", "hello-world"),
        ("hello world", "hello-world"),
        ("  leading and trailing  ", "leading-and-trailing"),
        ("many --- dashes___and   spaces", "many-dashes-and-spaces"),
        ("Crème brûlée", "creme-brulee"),
        ("C3PO & R2-D2", "c3po-r2-d2"),
        ("!!!", ""),
        ("", ""),
        ("already-a-slug", "already-a-slug"),
    ],
)
def test_slugify(text, expected):
    assert slugify(text) == expected


def test_slugify_with_another_separator():
    assert slugify("Hello, World!", separator="_") == "hello_world"


def test_truncate_and_word_count_unchanged():
    assert truncate("a long sentence", 9) == "a long..."
    with pytest.raises(ValueError):
        truncate("abc", 2)
    assert word_count("It's it, IT") == {"it's": 1, "it": 2}
