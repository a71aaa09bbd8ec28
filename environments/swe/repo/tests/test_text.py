from toolbox.text import slugify, truncate, word_count


def test_slugify_simple_words():
    assert slugify("hello world") == "hello-world"


def test_slugify_drops_accents():
    assert slugify("Crème brûlée") == "creme-brulee"


def test_slugify_punctuation():
    assert slugify("Hello, World!") == "hello-world"


def test_truncate():
    assert truncate("a long sentence", 9) == "a long..."
    assert truncate("short", 9) == "short"


def test_word_count():
    assert word_count("The cat saw the dog") == {"the": 2, "cat": 1, "saw": 1, "dog": 1}
