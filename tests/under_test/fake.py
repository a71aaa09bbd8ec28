"""The fake backend under test: host processes (`orsbox.sandbox.fake`)."""

from __future__ import annotations

import pytest

from orsbox.sandbox.fake import FakeBackend
from tests.runtimes import FAKE_DIFFERENCES, BackendUnderTest, FakeOutside

UNDER_TEST = {
    "fake": BackendUnderTest(
        "fake",
        "fake",
        FakeBackend,
        FAKE_DIFFERENCES,
        FakeOutside(),
        backend="fake",
        fixtures=(),
        marks=(pytest.mark.fake,),
    ),
}
