"""The documentation: a README that is a front page whose links all resolve, and a site
that `mkdocs build --strict` builds (a broken link or a page outside the nav fails it),
with reference pages that name every command and every route of the code it was built
from."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.servers import ROOT

README = ROOT / "README.md"
LINK = re.compile(r"\]\(([^)#]+)(?:#[^)]*)?\)")


def test_the_readme_is_a_front_page_whose_links_resolve() -> None:
    text = README.read_text()
    assert len(text.splitlines()) < 200
    local = [link for link in LINK.findall(text) if "://" not in link]
    assert local, "the README links into the documentation"
    missing = [link for link in local if not (ROOT / link).exists()]
    assert not missing


def test_the_site_builds_strictly_with_generated_references(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs", reason="pip install -e '.[docs]'")
    site = tmp_path / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    argv = [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)]
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    cli = (site / "reference" / "cli" / "index.html").read_text()
    for command in ("orsbox serve", "orsbox check", "orsbox eval", "orsbox cluster up"):
        assert command in cli
    http = (site / "reference" / "http" / "index.html").read_text()
    for route in ("/create", "/{env_name}/call", "/create_sandbox", "/health", "/delete"):
        assert route in http
    assert (site / "inspect" / "index.html").exists()
