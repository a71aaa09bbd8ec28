"""Build the task's files in /workspace (run once, as the agent's user, at setup)."""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tasks import KINDS, WORKSPACE

task = json.loads(os.environ["ORSBOX_TASK"])
make_files, _ = KINDS[task["kind"]]
for relative, content in make_files(task).items():
    path = os.path.join(WORKSPACE, relative)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(content)
