"""Small repositories and patches written for the patch-application tests: each case is
a repository (its git history included, as a tar to unpack at /testbed) and a patch,
made with git on the host from edits written here."""

from __future__ import annotations

import io
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

WORKDIR = "/testbed"
REPO_TAR = "/tmp/orsbox-repo.tar"
UNPACK_SCRIPT = (
    f"rm -rf {WORKDIR} && mkdir -p {WORKDIR} && tar --no-same-owner -xf {REPO_TAR} -C {WORKDIR}"
    f" && rm -f {REPO_TAR}"
)
# The working tree as one git tree id, untracked files (.rej, .orig) and modes included.
TREE_SCRIPT = f"""cd {WORKDIR}
export GIT_INDEX_FILE=$(mktemp -u)
git -c safe.directory='*' add -A . >/dev/null 2>&1
echo "ORSBOX-TREE $(git -c safe.directory='*' write-tree)"
rm -f "$GIT_INDEX_FILE"
"""


def lines(count: int, word: str = "line", **changed: str) -> str:
    """`line 1` .. `line <count>`, with `changed={"l5": "..."}` replacing line 5."""
    return "".join(changed.get(f"l{n}", f"{word} {n}") + "\n" for n in range(1, count + 1))


@dataclass(frozen=True)
class Case:
    name: str
    repo_tar: bytes
    patch: str


class Repo:
    """A scratch git repository on the host."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.git("init", "-q", "-b", "main")

    def git(self, *args: str) -> str:
        done = subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(self.folder), *args],
            capture_output=True,
            check=True,
        )
        return done.stdout.decode("utf-8", errors="surrogateescape")

    def write(self, files: dict[str, str | bytes]) -> None:
        for path, content in files.items():
            target = self.folder / path
            target.parent.mkdir(parents=True, exist_ok=True)
            data = content.encode() if isinstance(content, str) else content
            target.write_bytes(data)

    def commit(self, files: dict[str, str | bytes], message: str = "c") -> None:
        self.write(files)
        self.git("add", "-A")
        self.git("commit", "-qm", message)

    def diff(self, *options: str) -> str:
        """The working tree's changes against HEAD as a patch; HEAD is left as it was."""
        self.git("add", "-A")
        patch = self.git("diff", "--cached", "--binary", *options)
        self.git("reset", "-q", "--hard")
        self.git("clean", "-qfd")
        return patch

    def tar(self) -> bytes:
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as archive:
            archive.add(self.folder, arcname=".")
        return buffer.getvalue()


def _three_way(repo: Repo) -> str:
    """Made against an older commit whose context has since moved three lines above the
    change: plain and `--reject` applies fail, `patch --fuzz=5` keeps the three nearest
    context lines (8 were written) and fails too; `--3way` merges it from the old blob."""
    repo.commit({"app.txt": lines(40)}, "old")
    repo.write({"app.txt": lines(40, l20="line 20 fixed")})
    patch = repo.diff("-U8")
    repo.commit({"app.txt": lines(40, l17="line 17 moved on")}, "new")
    return patch


def _reject_half_way(repo: Repo) -> str:
    """Two files: the first applies as is, the second only with fuzz (an outer context
    line differs, and its old blob is not in the repository, so no `--3way`)."""
    repo.commit({"one.txt": lines(10), "two.txt": lines(10, "two")})
    repo.write({"one.txt": lines(10, l5="line 5 fixed"), "two.txt": lines(10, "two", l6="fixed")})
    patch = repo.diff()
    _rewrite_history(repo, {"two.txt": lines(10, "two", l3="two 3 local")})
    return patch


def _already_applied(repo: Repo) -> str:
    """The repository already holds the change; the patch's old blob is not in it."""
    repo.commit({"one.txt": lines(10)})
    repo.write({"one.txt": lines(10, l5="line 5 fixed")})
    patch = repo.diff()
    _rewrite_history(repo, {"one.txt": lines(10, l5="line 5 fixed")})
    return patch


def _rename(repo: Repo) -> str:
    """A rename with an edit, in git's rename form (`similarity index`, `rename from`)."""
    repo.commit({"src/old_name.py": lines(12)})
    (repo.folder / "src" / "old_name.py").rename(repo.folder / "src" / "new_name.py")
    repo.write({"src/new_name.py": lines(12, l2="line 2 edited")})
    return repo.diff("-M")


def _mode_change(repo: Repo) -> str:
    repo.commit({"run.sh": "#!/bin/sh\necho hi\n"})
    (repo.folder / "run.sh").chmod(0o755)
    return repo.diff()


def _deleted_file(repo: Repo) -> str:
    repo.commit({"gone.txt": lines(5), "kept.txt": lines(3)})
    (repo.folder / "gone.txt").unlink()
    return repo.diff()


def _rewrite_history(repo: Repo, files: dict[str, str | bytes]) -> None:
    """Make `files` part of the only commit, in a repository made anew from the working
    tree, so that the patch's old blobs are not in it (no `--3way` merge from them).
    A new repository rather than an amend and `git gc --prune=now`: once in a CI run
    that gc's repack failed (`bad revision`), and a new one has no old objects to drop."""
    repo.write(files)
    shutil.rmtree(repo.folder / ".git")
    repo.git("init", "-q", "-b", "main")
    repo.git("add", "-A")
    repo.git("commit", "-qm", "only")


BUILDERS: dict[str, Callable[[Repo], str]] = {
    "applies only with --3way": _three_way,
    "--reject fails half-way": _reject_half_way,
    "already applied": _already_applied,
    "rename": _rename,
    "mode change": _mode_change,
    "deleted file": _deleted_file,
}


def build(name: str) -> Case:
    with tempfile.TemporaryDirectory() as folder:
        repo = Repo(Path(folder))
        patch = BUILDERS[name](repo)
        return Case(name, repo.tar(), patch)


AGENT_EDITS = """mv src/old_name.py src/new_name.py && chmod +x run.sh && rm gone.txt \\
&& printf '\\000\\377\\001edited' >> data/blob.bin"""


def agent_repo_tar() -> bytes:
    """The repository the agent edits with `AGENT_EDITS`."""
    with tempfile.TemporaryDirectory() as folder:
        repo = Repo(Path(folder))
        files = {"src/old_name.py": lines(12), "run.sh": "#!/bin/sh\necho hi\n"}
        repo.commit({**files, "gone.txt": lines(5), "data/blob.bin": bytes(range(256))})
        return repo.tar()
