"""Grade /workspace/solution.py against the task's hidden test cases.

The cases are read into memory and this folder is deleted before the submitted code
runs, and that code runs in its own python process that is given only the arguments:
a submission can neither read the expected answers nor print its own success. Exit code
0 (reward 1) only when every case passes.
"""

import json
import os
import shutil
import subprocess
import sys

SOLUTION = "/workspace/solution.py"
MARKER = "@@orsbox-results@@ "
RUNNER_TIMEOUT_S = 20
RUNNER = r"""
import copy, importlib.util, json, sys
request = json.loads(sys.stdin.read())
spec = importlib.util.spec_from_file_location("solution", request["path"])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
function = getattr(module, request["function"], None)
if not callable(function):
    print("\n" + request["marker"] + json.dumps({"missing": True}))
    raise SystemExit(0)
results = []
for args in request["calls"]:
    try:
        results.append({"value": function(*copy.deepcopy(args))})
    except Exception as e:
        results.append({"error": f"{type(e).__name__}: {e}"})
print("\n" + request["marker"] + json.dumps({"results": results}, default=repr))
"""


def load_cases() -> dict:
    folder = os.environ["ORSBOX_GRADER_DIR"]
    with open(os.path.join(folder, "cases", os.environ["ORSBOX_TASK_ID"] + ".json")) as f:
        cases = json.load(f)
    shutil.rmtree(folder, ignore_errors=True)  # gone before the submission runs
    return cases


def run_solution(function: str, calls: list) -> dict:
    request = {"path": SOLUTION, "function": function, "calls": calls, "marker": MARKER}
    try:
        done = subprocess.run(
            [sys.executable, "-I", "-c", RUNNER],
            input=json.dumps(request),
            capture_output=True,
            text=True,
            timeout=RUNNER_TIMEOUT_S,
            cwd="/workspace",
        )
    except subprocess.TimeoutExpired:
        return {"failure": f"the tests timed out after {RUNNER_TIMEOUT_S}s"}
    for line in reversed(done.stdout.split("\n")):
        if line.startswith(MARKER):
            return json.loads(line[len(MARKER) :])
    return {"failure": "solution.py could not be run:\n" + done.stderr.strip()[-2000:]}


def same(value: object, expected: object) -> bool:
    """Equal as JSON, so True is not 1 and 2.0 is not 2."""
    return json.dumps(value, sort_keys=True) == json.dumps(expected, sort_keys=True)


def main() -> int:
    cases = load_cases()
    if not os.path.isfile(SOLUTION):
        print(f"{SOLUTION} does not exist: write your function there.")
        return 1
    answer = run_solution(cases["function"], [c["args"] for c in cases["cases"]])
    if "failure" in answer:
        print(answer["failure"])
        return 1
    if answer.get("missing"):
        print(f"{SOLUTION} defines no function {cases['function']}.")
        return 1
    failed = 0
    for case, result in zip(cases["cases"], answer["results"], strict=False):
        call = f"{cases['function']}({', '.join(map(repr, case['args']))})"
        if "error" in result:
            print(f"FAIL {call} raised {result['error']}")
        elif not same(result["value"], case["expected"]):
            print(f"FAIL {call} returned {result['value']!r}, expected {case['expected']!r}")
        else:
            continue
        failed += 1
    total = len(cases["cases"])
    print(f"{total - failed}/{total} hidden tests passed.")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
