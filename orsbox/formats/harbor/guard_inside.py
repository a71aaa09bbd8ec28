"""The Harbor verifier's guard, as it runs inside the sandbox (`python3 -I -S -c`, its
source sent by `orsbox.formats.harbor.guard`; standard library only, python 3.7 syntax
without annotations, as the guest's own code: the image's python runs it).

Two modes, one JSON object on standard input each:

  baseline  (at setup, before the agent has run anything; as the verifier's user) prints
            what the verifier's environment is made of in the image: the user's ids and
            home, PATH, this python, the verifier surface's files (content included) and
            the programs on the verifier's PATH;
  run       (at grading, as root, once every process of the agent but its services has
            been killed) makes the verifier's environment the image's again, guards the
            reward files while the services run, runs the tests as the verifier's user,
            then stops the services, and writes a report (JSON) to the path it is given.

The verifier surface is what a verifier runs without naming it: shell start-up files
(and what they name: `BASH_ENV` and `ENV` are set by them), the scripts installers
tell a verifier to source (`$HOME/.local/bin/env`: uv; `$HOME/.cargo/env`), package
tools' configuration, python's start-up hooks (`sitecustomize`, `usercustomize`,
executable `.pth` lines) and `/etc/ld.so.preload`. A surface file the agent added is
moved to a root-only quarantine; one it changed is given back the image's content. On
PATH, a program the agent added where it shadows one the image has later on PATH is
quarantined, as are a `uv` or `uvx` it added anywhere on PATH (ahead of the installer's
where PATH names `~/.local/bin` late) and uv's python and cache folders it added (the
verifier's installer puts its own there). Docs: docs/grading-integrity.md.

The guard, while kept services run (`processes.services`: what holds a listening TCP
socket): each reward file is created empty and held with a read lease (`F_SETLEASE`),
so whoever opens it for writing waits until the guard lets go; the guard sees the
break, notes which kept process is the one waiting (its `wchan` is `__break_lease`),
stops every kept process (SIGSTOP), and only then lets go: a service's write never
lands, the tests' own does. A reward file made, renamed or removed under the guard's
eyes (inotify) stops the services too, and is reported as replaced: nobody can tell
whose it is. Where leases are refused (gVisor), the services are killed before the
tests, as every process was before.
"""

import base64
import contextlib
import ctypes
import errno
import fcntl
import glob
import hashlib
import json
import os
import select
import signal
import stat
import struct
import sys
import time

CONTENT_KEPT = 256 * 1024  # a surface file's content is kept for restoring up to this size
QUARANTINE = "/var/lib/orsbox-quarantine"
HOME_FILES = (
    ".bashrc",
    ".bash_profile",
    ".bash_login",
    ".profile",
    ".bash_logout",
    ".zshenv",
    ".zprofile",
    ".zshrc",
    ".local/bin/env",
    ".local/bin/env.fish",
    ".cargo/env",
    ".config/pip/pip.conf",
    ".pip/pip.conf",
    ".config/uv/uv.toml",
    ".pydistutils.cfg",
)
SYSTEM_FILES = (
    "/etc/profile",
    "/etc/bash.bashrc",
    "/etc/bash.bash_logout",
    "/etc/environment",
    "/etc/ld.so.preload",
    "/etc/pip.conf",
    "/etc/xdg/pip/pip.conf",
    "/etc/uv/uv.toml",
)
SYSTEM_GLOBS = ("/etc/profile.d/*",)
PYTHON_DIR_GLOBS = (
    "/usr/lib/python3*",
    "/usr/lib/python3*/site-packages",
    "/usr/lib/python3/dist-packages",
    "/usr/local/lib/python3*",
    "/usr/local/lib/python3*/site-packages",
    "/usr/local/lib/python3*/dist-packages",
    "/etc/python3*",
)
HOOK_NAMES = ("sitecustomize.py", "sitecustomize.pyc", "usercustomize.py", "usercustomize.pyc")
INSTALLER_BIN = ("uv", "uvx")  # the verifier's uv installer writes them: never the agent's
INSTALLER_TREES = (".local/share/uv", ".cache/uv")  # uv's pythons and tools, its cache
LEASE_WAIT = "__break_lease"
WAKE_S = 0.25  # the guard's longest sleep: its events wake it sooner (`Wakeups`)
GUARD_FAILED = 125  # the exit code when the guard could not make the environment clean


# -- what the verifier's environment is made of ---------------------------------------


def verifier_path_dirs(home, path):
    """The folders the verifier looks programs up in, in order: uv's and cargo's, which
    their env scripts put first, then PATH."""
    dirs = [os.path.join(home, ".local/bin"), os.path.join(home, ".cargo/bin")]
    for d in path.split(":"):
        if d and d not in dirs:
            dirs.append(d)
    return dirs


def python_dirs(home):
    dirs = set()  # type: set[str]
    for pattern in (*PYTHON_DIR_GLOBS, home + "/.local/lib/python3*/site-packages"):
        dirs.update(d for d in glob.glob(pattern) if os.path.isdir(d))
    for d in sys.path:  # this python's own (a python built into /opt, say)
        if d and os.path.isdir(d):
            dirs.add(d)
    return dirs


def executable_pth(path):
    """Whether a .pth file has a line python executes (one starting with `import`)."""
    try:
        with open(path, "rb") as f:
            lines = f.read(CONTENT_KEPT).splitlines()
    except OSError:
        return False
    return any(line.startswith((b"import ", b"import\t")) for line in lines)


def surface_paths(home):
    """The verifier surface's files (the module docstring) for a verifier whose home is
    `home` (only its own start-up files are read: a root agent's plant in another
    user's home never runs in this verifier)."""
    paths = set(SYSTEM_FILES)
    for pattern in SYSTEM_GLOBS:
        paths.update(glob.glob(pattern))
    paths.update(os.path.join(home, name) for name in HOME_FILES)
    for d in python_dirs(home):
        paths.update(os.path.join(d, name) for name in HOOK_NAMES)
        for pth in glob.glob(os.path.join(d, "*.pth")):
            if executable_pth(pth):
                paths.add(pth)
    return sorted(paths)


def describe(path):
    """What is at `path`: None, ["link", target], or ["file", sha256, mode, content]
    (content in base64, None past CONTENT_KEPT)."""
    try:
        st = os.lstat(path)
    except OSError as e:
        return None if e.errno in (errno.ENOENT, errno.ENOTDIR) else ["unreadable"]
    if stat.S_ISLNK(st.st_mode):
        return ["link", os.readlink(path)]
    if not stat.S_ISREG(st.st_mode):
        return ["other", st.st_mode]
    try:
        with open(path, "rb") as f:
            data = f.read(CONTENT_KEPT + 1)
            digest = hashlib.sha256(data)
            for chunk in iter(lambda: f.read(1 << 20), b""):
                digest.update(chunk)
    except OSError:
        return ["unreadable"]
    content = base64.b64encode(data).decode() if len(data) <= CONTENT_KEPT else None
    return ["file", digest.hexdigest(), stat.S_IMODE(st.st_mode), content]


def same(a, b):
    if a is None or b is None:
        return a is b
    return a[:2] == b[:2]


def programs(d):
    """The names in folder `d` a shell would run (executable files and links)."""
    try:
        names = os.listdir(d)
    except OSError:
        return []
    return sorted(n for n in names if os.access(os.path.join(d, n), os.X_OK))


def baseline(config):
    import pwd

    home = os.environ.get("HOME") or pwd.getpwuid(os.getuid()).pw_dir
    path = os.environ.get("PATH", "")
    dirs = verifier_path_dirs(home, path)
    return {
        "uid": os.getuid(),
        "gid": os.getgid(),
        "groups": os.getgroups(),
        "home": home,
        "path": path,
        "python": os.path.realpath(sys.executable),
        "surface": {p: describe(p) for p in surface_paths(home)},
        "programs": {d: programs(d) for d in dirs},
        "trees": sorted(t for t in INSTALLER_TREES if os.path.lexists(os.path.join(home, t))),
        "leases": leases_work(),
    }


def leases_work():
    """Whether this kernel (gVisor's refuses them) gives file leases: the guard needs
    them to keep services running while the tests run."""
    import tempfile

    made, path = tempfile.mkstemp()
    os.close(made)  # a read lease is refused while the file is open for writing
    held = os.open(path, os.O_RDONLY)
    try:
        fcntl.fcntl(held, fcntl.F_SETLEASE, fcntl.F_RDLCK)
        fcntl.fcntl(held, fcntl.F_SETLEASE, fcntl.F_UNLCK)
        return True
    except OSError:
        return False
    finally:
        os.close(held)
        os.unlink(path)


# -- making it the image's again -------------------------------------------------------


class Quarantine:
    def __init__(self):
        self.root = os.path.join(QUARANTINE, time.strftime("%Y%m%dT%H%M%S"))

    def take(self, path):
        """Move `path` out of the verifier's way; where it went."""
        target = self.root + path
        os.makedirs(os.path.dirname(target), mode=0o700, exist_ok=True)
        os.chmod(QUARANTINE, 0o700)
        if os.path.lexists(target):
            target += f".{time.time_ns()}"
        try:
            os.rename(path, target)
        except OSError as e:
            if e.errno != errno.EXDEV:
                raise
            import shutil

            shutil.move(path, target)
        return target


def restore(path, was):
    """Put back what the image had at `path` (`describe`'s answer)."""
    if os.path.lexists(path) and not os.path.isdir(path):
        os.unlink(path)
    if was is None:
        return
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if was[0] == "link":
        os.symlink(was[1], path)
        return
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, was[2])
    with os.fdopen(fd, "wb") as f:
        f.write(base64.b64decode(was[3]))
    os.chmod(path, was[2])


def neutralise(base, plants):
    """Make the verifier surface and PATH the image's again; each plant found goes in
    `plants` as one line saying what was done."""
    quarantine = Quarantine()
    home = base["home"]
    surface = base["surface"]
    paths = dict.fromkeys(surface_paths(home) + sorted(surface))
    for path in paths:
        was, now = surface.get(path), describe(path)
        if same(was, now) or (was is not None and was[0] in ("other", "unreadable")):
            continue
        if os.path.isdir(path):
            continue
        restorable = was is not None and (was[0] == "link" or was[3] is not None)
        if now is None:
            done = "the image's restored" if restorable else "left so"
            plants.append(f"{path}: removed by the agent ({done})")
        else:
            kept_at = quarantine.take(path)
            done = "; the image's restored" if restorable else ""
            what = "added" if was is None else "changed"
            plants.append(f"{path}: {what} by the agent (moved to {kept_at}{done})")
        if restorable:
            restore(path, was)
    shadowing(base, quarantine, plants)
    for tree in INSTALLER_TREES:
        path = os.path.join(home, tree)
        if tree not in base["trees"] and os.path.lexists(path):
            plants.append(f"{path}: added by the agent (moved to {quarantine.take(path)})")


def shadowing(base, quarantine, plants):
    """Programs the agent put on the verifier's PATH ahead of the image's own of the same
    name, and the uv binaries it put where the verifier's installer puts its own."""
    home = base["home"]
    dirs = verifier_path_dirs(home, base["path"])
    had = base["programs"]
    local_bin = os.path.join(home, ".local/bin")  # where uv's installer puts uv and uvx
    for i, d in enumerate(dirs):
        before = set(had.get(d, []))
        later = set()
        for other in dirs[i + 1 :]:
            later.update(had.get(other, []))
        for name in programs(d):
            if name in before:
                continue
            path = os.path.join(d, name)
            if name in later:
                shadowed = next(o for o in dirs[i + 1 :] if name in had.get(o, []))
                why = f"shadows {os.path.join(shadowed, name)}"
            elif name in INSTALLER_BIN:
                why = "a name the verifier's uv installer puts in " + local_bin
            else:
                continue
            kept_at = quarantine.take(path)
            plants.append(f"{path}: added by the agent, {why} (moved to {kept_at})")


# -- the services and the guard --------------------------------------------------------


def process_table():
    table = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                raw = f.read()
        except OSError:
            continue
        rest = raw[raw.rfind(b")") + 2 :].split()
        table[int(name)] = (int(rest[1]), int(rest[19]), rest[0])
    return table


def service_tree(kept):
    """The kept services still alive, with everything they started since: pids."""
    table = process_table()
    roots = {pid for pid, tick in kept if pid in table and table[pid][1] == tick}
    tree = set(roots)
    grew = True
    while grew:
        grew = False
        for pid, (ppid, _, state) in table.items():
            if ppid in tree and pid not in tree and state != b"Z":
                tree.add(pid)
                grew = True
    return tree


def signal_all(pids, sig):
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, sig)


def stop_services(kept):
    """SIGSTOP the services until none of them, nor anything they start, runs."""
    stopped = set()  # type: set[int]
    for _ in range(50):
        tree = service_tree(kept) - stopped
        if not tree:
            break
        signal_all(tree, signal.SIGSTOP)
        stopped |= tree
    return stopped


def kill_services(kept):
    stop_services(kept)
    tree = service_tree(kept)
    signal_all(tree, signal.SIGKILL)
    deadline = time.time() + 2
    while tree and time.time() < deadline:
        table = process_table()
        tree = {p for p in tree if p in table and table[p][2] != b"Z"}
        time.sleep(0.005)


def waits_on_lease(pid):
    """Whether a thread of process `pid` is blocked opening a leased file (its kernel
    wait channel is `__break_lease`): the one about to write it."""
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return False
    for tid in threads:
        try:
            with open(f"/proc/{pid}/task/{tid}/wchan") as f:
                if f.read().strip() == LEASE_WAIT:
                    return True
        except OSError:
            pass
    return False


def command_line(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            raw = f.read(1600)
    except OSError:
        return "?"
    return raw.rstrip(b"\0").replace(b"\0", b" ").decode("utf-8", "replace")[:400]


IN_MOVED_FROM, IN_MOVED_TO = 0x40, 0x80
IN_CREATE, IN_DELETE, IN_DELETE_SELF, IN_MOVE_SELF = 0x100, 0x200, 0x400, 0x800
IN_NONBLOCK = 0o4000
ENTRY_EVENTS = IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO
SELF_EVENTS = IN_DELETE_SELF | IN_MOVE_SELF


class Inotify:
    def __init__(self):
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.fd = self.libc.inotify_init1(IN_NONBLOCK)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1")
        self.watches = {}

    def watch(self, path, mask):
        wd = self.libc.inotify_add_watch(self.fd, path.encode(), mask)
        if wd < 0:
            raise OSError(ctypes.get_errno(), f"inotify_add_watch {path}")
        self.watches[wd] = path

    def events(self):
        """(folder watched, name, mask) of each event since the last call."""
        out = []  # type: list[tuple[str, str, int]]
        try:
            data = os.read(self.fd, 65536)
        except BlockingIOError:
            return out
        offset = 0
        while offset + 16 <= len(data):
            wd, mask, _, size = struct.unpack_from("iIII", data, offset)
            name = data[offset + 16 : offset + 16 + size].rstrip(b"\0").decode("utf-8", "replace")
            out.append((self.watches.get(wd, "?"), name, mask))
            offset += 16 + size
        return out


class RewardGuard:
    """The reward files held while kept services run (the module docstring)."""

    def __init__(self, paths, uid, gid):
        self.paths = paths
        self.uid, self.gid = uid, gid
        self.leases = {}  # path -> the descriptor holding its lease
        self.made = {}  # path -> (inode, mtime_ns) of the empty file the guard made
        self.events = []  # reward files there before the tests, one line each
        self.attempts = []  # kept processes caught opening a reward file
        self.replaced = []  # reward files made, renamed or removed: whose, nobody can tell
        self.inotify = None
        self.armed = False

    def arm(self):
        """Make each reward file empty and lease it. False where leases are refused."""
        for path in self.paths:
            if os.path.lexists(path):
                self.events.append(f"{path}: there before the tests (removed)")
                os.unlink(path)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666)
            os.fchmod(fd, 0o666)
            os.fchown(fd, self.uid, self.gid)
            os.close(fd)
            st = os.lstat(path)
            self.made[path] = (st.st_ino, st.st_mtime_ns)
            held = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
            try:
                fcntl.fcntl(held, fcntl.F_SETLEASE, fcntl.F_RDLCK)
            except OSError:
                os.close(held)
                self.release()
                self.remove_untouched()
                return False
            self.leases[path] = held
        folder = os.path.dirname(self.paths[0])
        self.inotify = Inotify()
        self.inotify.watch(folder, ENTRY_EVENTS | SELF_EVENTS)
        self.inotify.watch(os.path.dirname(folder), ENTRY_EVENTS)
        self.armed = True
        return True

    def tripped(self, kept):
        """Whether something touched the reward files; who, when a kept process did."""
        broken = [
            p for p, fd in self.leases.items() if fcntl.fcntl(fd, fcntl.F_GETLEASE) != fcntl.F_RDLCK
        ]
        names = {os.path.basename(p) for p in self.paths}
        folder = os.path.dirname(self.paths[0])
        replaced = []
        for watched, name, mask in self.inotify.events() if self.inotify else ():
            if watched == folder and (name in names or mask & SELF_EVENTS):
                replaced.append(f"{folder}/{name}" if name else folder)
            elif watched != folder and name == os.path.basename(folder):
                replaced.append(folder)
        if not broken and not replaced:
            return False
        for pid in service_tree(kept):
            if waits_on_lease(pid):
                self.attempts.append(
                    f"{', '.join(broken)}: opened for writing by kept service {pid} "
                    f"({command_line(pid)}) while the tests ran; stopped before it wrote"
                )
        self.replaced += [f"{p}: made, renamed or removed while the services ran" for p in replaced]
        return True

    def release(self):
        for fd in self.leases.values():
            with contextlib.suppress(OSError):
                fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_UNLCK)
            os.close(fd)
        self.leases = {}

    def remove_untouched(self):
        """The empty files the guard made and nobody wrote: gone, so that a verifier that
        wrote no reward reads as one that wrote none."""
        for path, (ino, mtime) in self.made.items():
            try:
                st = os.lstat(path)
            except OSError:
                continue
            if st.st_ino == ino and st.st_mtime_ns == mtime and st.st_size == 0:
                os.unlink(path)


# -- the run ----------------------------------------------------------------------------


class Wakeups:
    """What wakes the guard while the tests run, without polling: a broken lease (the
    kernel's SIGIO to the holder), the tests' end (SIGCHLD), each through a pipe python
    writes a byte to on the signal (`signal.set_wakeup_fd`), and inotify's events on
    its own descriptor. Handled, not ignored: the tests start with both at their
    defaults, as a handled signal is reset by exec."""

    def __init__(self):
        self.read_end, write_end = os.pipe()
        for end in (self.read_end, write_end):
            os.set_blocking(end, False)
        signal.set_wakeup_fd(write_end)
        for sig in (signal.SIGIO, signal.SIGCHLD):
            signal.signal(sig, lambda number, frame: None)

    def wait(self, other=None):
        ready, _, _ = select.select([self.read_end] + ([other] if other else []), [], [], WAKE_S)
        if self.read_end in ready:
            with contextlib.suppress(BlockingIOError):
                os.read(self.read_end, 4096)


CAP_SETGID, CAP_SETUID = 6, 7


def can_become(uid):
    """Whether this process can run the tests as `uid` (root without CAP_SETUID and
    CAP_SETGID, as in a hardened sandbox, cannot)."""
    if uid == os.getuid():
        return True
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("CapEff:"):
                caps = int(line.split()[1], 16)
                return bool(caps & (1 << CAP_SETUID)) and bool(caps & (1 << CAP_SETGID))
    return False


def start_tests(config, base):
    import subprocess

    env = dict(os.environ)
    env.update({"HOME": base["home"]})
    env.update(config["env"])
    uid, gid, groups = base["uid"], base["gid"], base["groups"]

    def become_user():
        if os.getuid() != uid:
            os.setgroups(groups)
            os.setgid(gid)
            os.setuid(uid)

    return subprocess.Popen(
        config["argv"], env=env, cwd=config.get("cwd") or None, preexec_fn=become_user
    )


def run(config):
    base = config["baseline"]
    kept = [tuple(k) for k in config["kept"]]
    report = {"plants": [], "kept": [command_line(p) for p, _ in kept]}  # type: dict
    report.update({"events": [], "attempts": [], "services": "none", "error": None})
    wakeups = Wakeups()  # before the leases: a broken one signals its holder (SIGIO)
    guard = RewardGuard(config["reward_files"], base["uid"], base["gid"])
    try:
        stop_services(kept)
        neutralise(base, report["plants"])
        if kept and not guard.arm():
            kill_services(kept)
            report["services"] = "stopped before the tests: this runtime refuses file leases"
            kept = []
    except Exception as e:  # the tests must not run in an environment not made clean
        kill_services(kept)
        report["error"] = f"{type(e).__name__}: {e}"
        write_report(config["report"], report)
        return GUARD_FAILED
    if not can_become(base["uid"]):  # the host runs them as that user (`guard.run_tests`)
        kill_services(kept)
        guard.release()
        guard.remove_untouched()
        if kept:
            report["services"] = "stopped before the tests: root here cannot change user"
        report["ran_tests"] = False
        write_report(config["report"], report)
        return 0
    if kept:
        report["services"] = "kept"
        signal_all(service_tree(kept), signal.SIGCONT)
    report["ran_tests"] = True
    child = start_tests(config, base)
    while child.poll() is None:
        if guard.armed and guard.tripped(kept):
            stop_services(kept)
            guard.release()
            guard.armed = False
            report["services"] = "stopped when a reward file was touched"
        if guard.armed:
            wakeups.wait(guard.inotify.fd if guard.inotify else None)
        else:
            child.wait()
    kill_services(kept)
    if guard.armed:
        guard.tripped(kept)
    if config["kept"]:  # kept at submit, stopped or not: the tests may have been touched
        report["tests_changed"] = changed_tests(config["tests"], config["tests_digest"])
    guard.release()
    guard.remove_untouched()
    report["events"], report["attempts"] = guard.events, guard.attempts
    report["replaced"] = guard.replaced
    write_report(config["report"], report)
    return child.returncode


def changed_tests(folder, digests):
    """The tests' files (as the host sent them: relative path -> sha256) whose content
    is not what was sent."""
    changed = []
    for name, digest in sorted(digests.items()):
        path = os.path.join(folder, name)
        now = describe(path)
        if now is None or now[0] != "file" or now[1] != digest:
            changed.append(path)
    return changed


def write_report(path, report):
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    if os.path.lexists(path):
        os.unlink(path)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(report, f)


def main():
    config = json.loads(sys.stdin.read() or "{}")
    sys.stdin.close()
    os.close(0)
    os.open(os.devnull, os.O_RDONLY)  # the tests get no standard input, as under docker exec
    if sys.argv[1] == "baseline":
        sys.stdout.write(json.dumps(baseline(config)))
        return 0
    code = run(config)
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main())
