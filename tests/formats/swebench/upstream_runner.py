"""Run one swebench version's own `run_instance` on containers the test prepared, and
print what each patch application came to: `[{"applied": bool, "tree": str | null}]`,
with `"incomplete"` (the harness's log) when the patch applied but the eval script's
output never came back (an error of the harness's own machinery, not an outcome).

Run as a script, in its own process, so that the version under test is whichever
`swebench` the process imports (the installed 5.0.2, or 4.1.0's wheel on PYTHONPATH).
Only container creation is redirected, to the prepared container; the patch copy, the
application attempts, the eval script (which prints the working tree's git tree, see
`patch_cases.TREE_SCRIPT`) and the cleanup are the harness's own. Input on stdin: a list
of `{"container", "patch", "eval_script"}` (one process for all: the import is slow);
logs go under the working directory.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import docker
import swebench
from swebench.harness import run_evaluation
from swebench.harness.constants import APPLY_PATCH_PASS, RUN_EVALUATION_LOG_DIR

INSTANCE_ID = "orsbox__patching-1"
TREE = re.compile(r"^ORSBOX-TREE ([0-9a-f]{40})$", re.M)


def run_v4(container: object, patch: str, eval_script: str, client: object, run_id: str) -> None:
    from swebench.harness.test_spec.test_spec import TestSpec

    run_evaluation.build_container = lambda *args, **kwargs: container
    spec = TestSpec(
        instance_id=INSTANCE_ID,
        repo="pytest-dev/pytest",  # any repository 4.1.0 knows a log parser for
        version="0",
        repo_script_list=[],
        eval_script_list=[eval_script],
        env_script_list=[],
        arch="x86_64",
        FAIL_TO_PASS=[],
        PASS_TO_PASS=[],
        language="py",
        docker_specs={},
        namespace=None,
    )
    pred = {"instance_id": INSTANCE_ID, "model_name_or_path": "m", "model_patch": patch}
    run_evaluation.run_instance(spec, pred, False, False, client, run_id, timeout=300)


def run_v5(container: object, patch: str, eval_script: str, client: object, run_id: str) -> None:
    from swebench.harness.utils import make_test_spec

    run_evaluation.create_container = lambda *args, **kwargs: container
    spec = make_test_spec(
        {
            "instance_id": INSTANCE_ID,
            "image": "unused",
            "repo": "orsbox/patching",
            "version": "0",
            "FAIL_TO_PASS": [],
            "PASS_TO_PASS": [],
            "log_parser": "parse_log_pytest",
            "eval_type": "pass_and_fail",
            "eval_script": eval_script,
        }
    )
    pred = {"instance_id": INSTANCE_ID, "model_name_or_path": "m", "model_patch": patch}
    run_evaluation.run_instance(spec, pred, client, run_id, timeout=300)


def outcome(job: dict[str, str], run_id: str, client: docker.DockerClient) -> dict[str, object]:
    container = client.containers.get(job["container"])
    run = run_v4 if swebench.__version__.startswith("4.") else run_v5
    run(container, job["patch"], job["eval_script"], client, run_id)
    log_dir = Path(RUN_EVALUATION_LOG_DIR) / run_id / "m" / INSTANCE_ID
    applied = APPLY_PATCH_PASS in (log_dir / "run_instance.log").read_text()
    output = log_dir / "test_output.txt"
    found = TREE.search(output.read_text()) if output.exists() else None
    result: dict[str, object] = {"applied": applied, "tree": found[1] if found else None}
    if applied and not found:  # the eval script prints a tree whenever it runs
        result["incomplete"] = (log_dir / "run_instance.log").read_text()[-3000:]
    return result


def main() -> None:
    jobs = json.load(sys.stdin)
    client = docker.from_env()
    results = [outcome(job, f"orsbox-patching-{n}", client) for n, job in enumerate(jobs)]
    print(json.dumps({"version": swebench.__version__, "results": results}))


if __name__ == "__main__":
    main()
