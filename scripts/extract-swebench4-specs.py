"""Write orsbox/formats/swebench/specs_v4.json from an installed swebench 4.1.0.

swebench 5 dropped the per-repository, per-version spec tables that SWE-bench 4 rows
(no `eval_script` column) are graded with, and swebench 4 and 5 cannot be installed
together. So orsbox ships the parts of swebench 4.1.0's `MAP_REPO_VERSION_TO_SPECS`
that its eval script uses (test_cmd, eval_commands, install), for Python repositories,
as data, with its origin. Regenerate with:

    python3 -m venv /tmp/sweb4 && /tmp/sweb4/bin/pip install swebench==4.1.0
    /tmp/sweb4/bin/python scripts/extract-swebench4-specs.py
"""

from __future__ import annotations

import json
from importlib.metadata import version
from pathlib import Path

from swebench.harness.constants import MAP_REPO_TO_EXT, MAP_REPO_VERSION_TO_SPECS

FIELDS = ("test_cmd", "eval_commands", "install")
OUT = Path(__file__).resolve().parents[1] / "orsbox/formats/swebench/specs_v4.json"


def main() -> None:
    assert version("swebench") == "4.1.0", "run it with swebench 4.1.0 installed"
    specs = {
        repo: {
            v: {k: spec[k] for k in FIELDS if k in spec}
            for v, spec in sorted(versions.items())
            if isinstance(spec.get("test_cmd"), str)
        }
        for repo, versions in sorted(MAP_REPO_VERSION_TO_SPECS.items())
        if MAP_REPO_TO_EXT.get(repo) == "py"  # orsbox writes the Python eval script
    }
    specs = {repo: versions for repo, versions in specs.items() if versions}
    document = {
        "origin": "swebench 4.1.0 from PyPI, swebench/harness/constants: "
        "MAP_REPO_VERSION_TO_SPECS (test_cmd, eval_commands, install of the Python "
        "repositories); MIT licence, Copyright (c) 2023 Carlos E Jimenez, "
        "John Yang, Alexander Wettig, Shunyu Yao, Kexin Pei, Ofir Press, Karthik Narasimhan",
        "made_by": "scripts/extract-swebench4-specs.py",
        "specs": specs,
    }
    OUT.write_text(json.dumps(document, indent=1, sort_keys=False) + "\n")
    print(f"{OUT}: {len(specs)} repositories, {sum(map(len, specs.values()))} versions")


if __name__ == "__main__":
    main()
