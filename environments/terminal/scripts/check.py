"""Check the machine's state for the task; exit code 0 when the task is done."""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tasks import KINDS

task = json.loads(os.environ["ORSBOX_TASK"])
_, check = KINDS[task["kind"]]
passed, message = check(task)
print(message)
sys.exit(0 if passed else 1)
