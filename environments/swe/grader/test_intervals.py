"""Hidden tests for toolbox.intervals (the merge-touching task)."""

import pytest
from toolbox.intervals import merge, overlaps, total_length


@pytest.mark.parametrize(
    ("intervals", "expected"),
    [
        ([(1, 3), (3, 5)], [(1, 5)]),
        ([(3, 5), (1, 3)], [(1, 5)]),
        ([(1, 3), (3, 3), (3, 4)], [(1, 4)]),
        ([(5, 8), (1, 3), (2, 4)], [(1, 4), (5, 8)]),
        ([(1, 2), (4, 5)], [(1, 2), (4, 5)]),
        ([(0, 10), (2, 3), (10, 12)], [(0, 12)]),
        ([], []),
    ],
)
def test_merge(intervals, expected):
    assert merge(intervals) == expected


def test_total_length_counts_shared_points_once():
    assert total_length([(1, 3), (3, 5)]) == 4
    assert total_length([(0, 10), (5, 15)]) == 15


def test_backwards_intervals_are_rejected():
    with pytest.raises(ValueError):
        merge([(4, 1)])
    with pytest.raises(ValueError):
        overlaps((2, 1), (0, 5))


def test_overlaps_unchanged():
    assert overlaps((1, 3), (3, 4))
    assert not overlaps((1, 2), (3, 4))
