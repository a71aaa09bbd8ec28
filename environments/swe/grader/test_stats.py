"""Hidden tests for toolbox.stats (the median-even task)."""

import math

import pytest
from toolbox.stats import mean, median, mode, stdev, variance


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([1, 2, 3, 4], 2.5),
        ([4, 1, 3, 2], 2.5),
        ([1, 2], 1.5),
        ([5, 5], 5),
        ([-3, -1, 1, 3], 0),
        ([1.5, 2.5, 10, 20, 30, 40], 15),
        ([7], 7),
        ([3, 1, 2], 2),
        ([9, 1, 5, 3, 7], 5),
    ],
)
def test_median(values, expected):
    assert median(values) == expected


def test_median_accepts_any_iterable_and_leaves_the_input_alone():
    values = [4, 3, 2, 1]
    assert median(iter(values)) == 2.5
    assert values == [4, 3, 2, 1]


def test_median_of_nothing_is_an_error():
    with pytest.raises(ValueError):
        median([])


def test_mean_mode_variance_stdev_unchanged():
    assert mean([1, 2, 3, 4]) == 2.5
    assert mode([3, 1, 3, 1, 2]) == 1
    assert variance([1, 2, 3, 4]) == pytest.approx(5 / 3)
    assert math.isclose(stdev([2, 4, 4, 4, 5, 5, 7, 9], sample=False), 2)
    with pytest.raises(ValueError):
        variance([1])
