"""The terminal tasks: how each kind builds its files, and how it is checked.

Every kind has `files(task)`, the files to create (path -> content, made the same way
from the task's seed every time), and `check(task)`, which inspects the machine and
returns (passed, message). Checkers compare against files(task) recomputed in memory,
never against the files the agent could have changed.
"""

from __future__ import annotations

import hashlib
import os
import random
import stat
import subprocess

WORKSPACE = "/workspace"
ANSWER = os.path.join(WORKSPACE, "answer.txt")
WORDS = [
    "amber",
    "basalt",
    "cedar",
    "delta",
    "ember",
    "fjord",
    "glacier",
    "harbor",
    "iris",
    "juniper",
    "krill",
    "lagoon",
    "meadow",
    "nectar",
    "orchid",
    "pebble",
    "quartz",
    "raven",
    "sierra",
    "tundra",
    "umber",
    "violet",
    "willow",
    "xenon",
    "yarrow",
    "zephyr",
]


def _text(rng: random.Random, lines: int) -> str:
    return "".join(" ".join(rng.choices(WORDS, k=rng.randint(3, 9))) + "\n" for _ in range(lines))


def _answer() -> str | None:
    try:
        with open(ANSWER) as f:
            return f.read().strip()
    except OSError:
        return None


# -- find_by_content ----------------------------------------------------------------------
def _find_tree(task: dict) -> tuple[dict[str, str], str]:
    """The files, and which one holds the token line."""
    rng = random.Random(task["seed"])
    files = {}
    for i in range(160):
        folder = "/".join(rng.choices(WORDS[:8], k=rng.randint(1, 4)))
        files[f"data/{folder}/{rng.choice(WORDS)}-{i}.txt"] = _text(rng, rng.randint(2, 30))
    needle, decoy, near_miss = rng.sample(sorted(files), 3)
    files[needle] += f"token: {task['token']}\n" + _text(rng, 3)
    files[decoy] += f"stale-token: {task['token']}\n"
    files[near_miss] += f"token: {task['token']}0\n"
    return files, needle


def find_files(task: dict) -> dict[str, str]:
    return _find_tree(task)[0]


def find_check(task: dict) -> tuple[bool, str]:
    files, needle = _find_tree(task)
    expected = hashlib.sha256(files[needle].encode()).hexdigest()
    answer = _answer()
    if answer is None:
        return False, f"{ANSWER} does not exist"
    if answer != expected:
        return False, f"{ANSWER} holds {answer[:80]!r}, which is not the file's SHA-256"
    return True, f"correct: {needle} has SHA-256 {expected}"


# -- count_errors ---------------------------------------------------------------------------
LEVELS = ["INFO", "INFO", "WARN", "ERROR", "DEBUG"]


def log_files(task: dict) -> dict[str, str]:
    rng = random.Random(task["seed"])
    files = {}
    for service in ("api", "worker", "scheduler", "auth/tokens"):
        for day in range(1, rng.randint(3, 6)):
            times = sorted(
                (rng.randrange(24), rng.randrange(60)) for _ in range(rng.randint(5, 40))
            )
            files[f"logs/{service}/2024-05-{day:02d}.log"] = "".join(
                f"2024-05-{day:02d}T{h:02d}:{m:02d}:00 {rng.choice(LEVELS)} "
                f"{' '.join(rng.choices(WORDS, k=4))}\n"
                for h, m in times
            )
    files["logs/api/2024-04-30.log.1"] = "2024-04-30T23:59:00 ERROR rotated away\n" * 7
    files["logs/README.txt"] = "ERROR lines are counted by the on-call rota.\n"
    return files


def count_check(task: dict) -> tuple[bool, str]:
    expected = sum(
        "ERROR" in line
        for path, text in log_files(task).items()
        if path.endswith(".log")
        for line in text.splitlines()
    )
    answer = _answer()
    if answer is None:
        return False, f"{ANSWER} does not exist"
    if answer != str(expected):
        return False, f"{ANSWER} holds {answer[:80]!r}; that is not the number of ERROR lines"
    return True, f"correct: {expected} lines"


# -- rename_extension -------------------------------------------------------------------------
def photo_files(task: dict) -> dict[str, str]:
    rng = random.Random(task["seed"])
    files = {}
    for i in range(40):
        folder = rng.choice(["2021", "2022/summer", "2022/winter", "scans", "scans/old.jpeg"])
        ext = rng.choice([".jpeg", ".jpeg", ".jpg", ".png", ".jpeg.txt"])
        files[f"photos/{folder}/img_{i:03d}{ext}"] = f"pixels {i} {rng.random()}\n"
    return files


def _tree(root: str) -> dict[str, str]:
    found = {}
    for folder, _, names in os.walk(root):
        for name in names:
            path = os.path.join(folder, name)
            with open(path, errors="replace") as f:
                found[os.path.relpath(path, WORKSPACE)] = f.read()
    return found


def rename_check(task: dict) -> tuple[bool, str]:
    expected = {
        (p[: -len(".jpeg")] + ".jpg" if p.endswith(".jpeg") else p): text
        for p, text in photo_files(task).items()
    }
    found = _tree(os.path.join(WORKSPACE, "photos"))
    missing = sorted(set(expected) - set(found))
    extra = sorted(set(found) - set(expected))
    changed = sorted(p for p in set(expected) & set(found) if expected[p] != found[p])
    if missing or extra or changed:
        return False, (
            f"the photos are not as asked: {len(missing)} missing (e.g. {missing[:2]}), "
            f"{len(extra)} unexpected (e.g. {extra[:2]}), {len(changed)} with changed content"
        )
    return True, f"correct: all {len(expected)} files are as asked"


# -- script -----------------------------------------------------------------------------------
def script_files(task: dict) -> dict[str, str]:
    return {}


def script_check(task: dict) -> tuple[bool, str]:
    path = os.path.join(WORKSPACE, "bin", "greet")
    if not os.path.isfile(path) or not os.stat(path).st_mode & stat.S_IXUSR:
        return False, f"{path} is missing or not executable"
    names = random.Random(task["seed"]).sample(["Ada", "Grace Hopper", "Linus", "Ken"], 2)
    for args, want in [([], "Hello, world!")] + [([n], f"Hello, {n}!") for n in names]:
        try:
            done = subprocess.run([path, *args], capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired) as e:
            return False, f"running greet {args} failed: {e}"
        if done.stdout.strip() != want:
            return (
                False,
                f"greet {' '.join(repr(a) for a in args)} printed {done.stdout.strip()!r}, expected {want!r}",
            )
    return True, "correct: greet greets"


KINDS = {
    "find_by_content": (find_files, find_check),
    "count_errors": (log_files, count_check),
    "rename_extension": (photo_files, rename_check),
    "script": (script_files, script_check),
}
