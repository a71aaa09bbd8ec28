"""The native sleeper's build on the host (orsbox/sandbox/guest/sleeper/): a static
executable from musl-gcc, and no sleeper (guests then sleep as bash) when there is no
compiler, it is turned off, or the build fails. scripts/test.sh installs musl-tools."""

from __future__ import annotations

import logging
import shutil
from collections.abc import Iterator

import pytest

from orsbox.sandbox.guest import sleeper
from orsbox.sandbox.guest.sleeper import CC_VARIABLE, sleeper_binary

PT_INTERP = 3  # a program header asking for a dynamic loader


@pytest.fixture(autouse=True)
def fresh_build() -> Iterator[None]:
    sleeper_binary.cache_clear()
    yield
    sleeper_binary.cache_clear()


def program_header_types(elf: bytes) -> list[int]:
    """The p_type of each program header of a 64-bit little-endian ELF."""
    assert elf[:4] == b"\x7fELF" and elf[4] == 2 and elf[5] == 1, elf[:8]
    offset = int.from_bytes(elf[0x20:0x28], "little")
    size = int.from_bytes(elf[0x36:0x38], "little")
    count = int.from_bytes(elf[0x38:0x3A], "little")
    return [int.from_bytes(elf[offset + i * size :][:4], "little") for i in range(count)]


def test_musl_gcc_builds_a_static_sleeper(monkeypatch: pytest.MonkeyPatch) -> None:
    if shutil.which("musl-gcc") is None:
        pytest.fail("musl-gcc is missing: scripts/test.sh installs musl-tools")
    monkeypatch.delenv(CC_VARIABLE, raising=False)
    binary = sleeper_binary()
    assert binary is not None
    types = program_header_types(binary)
    assert types and PT_INTERP not in types  # runs in any image: no loader, no libc needed
    assert len(binary) < 200_000  # kept in a memfd per sandbox: its size is memory


def test_none_turns_the_sleeper_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CC_VARIABLE, "none")
    assert sleeper_binary() is None


def test_a_failed_build_means_no_sleeper_and_says_why(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv(CC_VARIABLE, "false")  # a compiler that fails
    with caplog.at_level(logging.WARNING, logger=sleeper.__name__):
        assert sleeper_binary() is None
    assert "did not build" in caplog.text


def test_without_a_compiler_there_is_no_sleeper(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CC_VARIABLE, raising=False)
    monkeypatch.setattr(sleeper.shutil, "which", lambda name: None)
    assert sleeper_binary() is None
