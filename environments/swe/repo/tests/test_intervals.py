import pytest
from toolbox.intervals import merge, overlaps, total_length


def test_merge_overlapping():
    assert merge([(5, 8), (1, 3), (2, 4)]) == [(1, 4), (5, 8)]


def test_merge_touching():
    assert merge([(1, 3), (3, 5)]) == [(1, 5)]


def test_merge_rejects_backwards_intervals():
    with pytest.raises(ValueError):
        merge([(4, 1)])


def test_total_length():
    assert total_length([(0, 10), (5, 15)]) == 15


def test_overlaps():
    assert overlaps((1, 3), (3, 4))
    assert not overlaps((1, 2), (3, 4))
