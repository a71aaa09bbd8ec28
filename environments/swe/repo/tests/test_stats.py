import math

import pytest
from toolbox.stats import mean, median, mode, stdev, variance


def test_mean():
    assert mean([1, 2, 3, 4]) == 2.5


def test_mean_of_nothing_is_an_error():
    with pytest.raises(ValueError):
        mean([])


def test_median_of_odd_length():
    assert median([3, 1, 2]) == 2


def test_median_of_even_length():
    assert median([1, 2, 3, 4]) == 2.5


def test_mode_prefers_the_smallest_on_a_tie():
    assert mode([3, 1, 3, 1, 2]) == 1


def test_variance_and_stdev():
    assert variance([2, 4, 4, 4, 5, 5, 7, 9], sample=False) == 4
    assert math.isclose(stdev([2, 4, 4, 4, 5, 5, 7, 9], sample=False), 2)
