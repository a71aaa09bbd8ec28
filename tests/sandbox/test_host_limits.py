"""The host limits `orsbox doctor` checks, read from a fake /proc laid out in a tmp
directory: the arithmetic of how many more episodes each allows, and which one stops
them first."""

from __future__ import annotations

import os
from pathlib import Path

from orsbox.cli.doctor import limits_check
from orsbox.sandbox.docker.engine_limits import (
    CONTAINERD_FDS,
    DOCKERD_FDS,
    SHIM_THREADS,
    engine_limits,
    episode_cost,
    listener,
)
from orsbox.sandbox.host_limits import (
    SERVER_COST,
    EpisodeCost,
    HostLimit,
    Proc,
    first_to_stop,
    kernel_limits,
)


def limit(name: str, value: int | None, in_use: int, cost: float, **kw: bool) -> HostLimit:
    return HostLimit(name, value, in_use, cost, f"raise {name}", **kw)


def write(root: Path, path: str, text: str) -> None:
    (root / path).parent.mkdir(parents=True, exist_ok=True)
    (root / path).write_text(text)


def fds(root: Path, pid: str, targets: list[str]) -> None:
    (root / pid / "fd").mkdir(parents=True, exist_ok=True)
    for number, target in enumerate(targets):
        os.symlink(target, root / pid / "fd" / str(number))


LIMITS = """Limit                     Soft Limit           Hard Limit           Units
Max processes             96362                96362                processes
Max open files            {soft}                {hard}                files
"""


def test_headroom_is_what_is_left_over_the_cost_of_one_episode() -> None:
    assert limit("pid_max", 32768, 768, 16).headroom == 2000
    assert limit("pid_max", 32768, 768, 15.9).headroom == 2012  # rounded down
    assert limit("full", 100, 120, 1).headroom == 0
    assert limit("unlimited", None, 5, 1).headroom is None
    assert limit("unused", 128, 0, 0).headroom is None


def test_the_first_to_stop_is_the_least_headroom_among_those_every_episode_uses() -> None:
    limits = [
        limit("files", 20000, 0, 10),  # 2000
        limit("tasks", 32768, 768, 32),  # 1000
        limit("inotify", 128, 0, 0),  # unbound
        limit("bridge", 1023, 0, 1, networked_only=True),
    ]
    assert first_to_stop(limits) == limits[1]
    assert first_to_stop(limits, networked=True) == limits[3]
    assert first_to_stop([limits[2]]) is None


def test_doctor_fails_naming_the_limit_and_its_setting_when_the_next_thousand_do_not_fit() -> None:
    tasks = limit("kernel.pid_max", 32768, 20000, 15)  # 851 more
    files = limit("dockerd open files", 20000, 0, 8)  # 2500 more
    check = limits_check([files, tasks], 1000)
    assert not check.ok
    assert check.detail.startswith("kernel.pid_max stops them first, at 851 more")
    assert check.fix == "raise kernel.pid_max"
    assert limits_check([files, tasks], 800).ok


def test_doctor_fails_on_a_networked_only_limit_below_the_goal() -> None:
    bridge = limit("guarded bridge ports", 1023, 100, 1, networked_only=True)  # 923
    check = limits_check([limit("files", 20000, 0, 8), bridge], 1000)
    assert not check.ok and check.fix == "raise guarded bridge ports"
    assert "(networked: guarded bridge ports at 923)" in check.detail


def fake_proc(root: Path) -> Proc:
    for name, value in {
        "kernel/pid_max": "1000",
        "kernel/threads-max": "100000",
        "fs/file-max": "50000",
        "fs/inotify/max_user_instances": "128",
        "fs/inotify/max_user_watches": "8192",
        "fs/mount-max": "100000",
        "vm/max_map_count": "65530",
        "kernel/keys/root_maxkeys": "1000000",
    }.items():
        write(root, f"sys/{name}", value + "\n")
    write(root, "sys/fs/file-nr", "10000\t0\t50000\n")
    write(root, "loadavg", "0.50 0.40 0.30 2/100 4242\n")
    write(root, "self/limits", LIMITS.format(soft=1024, hard=4096))
    write(root, "self/maps", "m\n" * 400)
    write(root, "self/mountinfo", "m\n" * 30)
    write(root, "key-users", "    0:    12 11/11 8/1000000 200/25000000\n")
    fds(root, "self", ["/dev/null"] * 24)
    fds(root, "77", ["anon_inode:inotify", "anon_inode:inotify", "pipe:[1]"])
    return Proc(root)


def test_kernel_limits_from_a_fake_proc(tmp_path: Path) -> None:
    cost = EpisodeCost(tasks=8.85, open_files=98.6, inotify_instances=1, mounts=2, keys=1)
    found = {lim.name: lim for lim in kernel_limits(cost, fake_proc(tmp_path))}
    assert SERVER_COST.threads == 0.15 and SERVER_COST.fds == 1.4  # the figures below
    assert found["kernel.pid_max"].headroom == (1000 - 100) // 9
    assert found["fs.file-max"].headroom == (50000 - 10000) // 100
    assert found["server open files (ulimit -n)"].limit == 1024
    assert found["server open files (ulimit -n)"].headroom == int((1024 - 24) / 1.4)
    assert found["fs.inotify.max_user_instances"].in_use == 2
    assert found["fs.inotify.max_user_instances"].headroom == 126
    assert found["fs.mount-max"].headroom == (100000 - 30) // 2
    assert found["kernel.keys.root_maxkeys"].in_use == 8  # qnkeys, what the quota counts
    assert "net.netfilter.nf_conntrack_max" not in found  # nf_conntrack not loaded
    assert first_to_stop(list(found.values())) == found["kernel.pid_max"]
    assert "sysctl -w kernel.pid_max=" in found["kernel.pid_max"].raise_with


def test_engine_limits_from_its_pid_file_and_cgroup(tmp_path: Path) -> None:
    proc, sys = tmp_path / "proc", tmp_path / "sys"
    socket = tmp_path / "run" / "docker.sock"
    write(tmp_path, "run/docker.pid", "4242\n")
    write(proc, "4242/limits", LIMITS.format(soft=2048, hard=2048))
    fds(proc, "4242", ["socket:[9]"] * 48)
    write(proc, "4242/cgroup", "8:pids:/system.slice/docker.service\n1:cpu:/\n")
    write(sys, "fs/cgroup/pids/system.slice/docker.service/pids.max", "4915\n")
    write(sys, "fs/cgroup/pids/system.slice/docker.service/pids.current", "115\n")
    found = {lim.name: lim for lim in engine_limits(f"unix://{socket}", Proc(proc), sys)}
    assert found["dockerd open files"].headroom == int((2048 - 48) / DOCKERD_FDS)
    assert "LimitNOFILE=" in found["dockerd open files"].raise_with
    tasks = found["engine cgroup tasks (TasksMax)"]
    assert tasks.headroom == int((4915 - 115) / SHIM_THREADS)
    assert "TasksMax=infinity" in tasks.raise_with
    assert found["guarded bridge ports"].networked_only
    assert found["guarded bridge ports"].headroom == 1023
    assert "containerd open files" not in found  # no containerd in this fake /proc
    assert CONTAINERD_FDS > 0


def test_the_engine_is_whoever_listens_on_its_socket_not_init(tmp_path: Path) -> None:
    write(
        tmp_path,
        "net/unix",
        "Num       RefCount Protocol Flags    Type St Inode Path\n"
        "0000: 00000002 00000000 00010000 0001 01 5150 /run/engine.sock\n"
        "0000: 00000002 00000000 00010000 0001 01 6160 /run/other.sock\n",
    )
    fds(tmp_path, "1", ["socket:[5150]"])  # systemd's socket activation
    fds(tmp_path, "300", ["socket:[6160]"])
    fds(tmp_path, "812", ["/dev/null", "socket:[5150]"])
    assert listener(Proc(tmp_path), "/run/engine.sock") == 812
    assert listener(Proc(tmp_path), "/run/none.sock") is None


def test_cgroup_v2_adds_an_inotify_instance_per_shim(tmp_path: Path) -> None:
    assert episode_cost(tmp_path).inotify_instances == 0
    write(tmp_path, "cgroup.controllers", "cpu memory pids\n")
    assert episode_cost(tmp_path).inotify_instances == 1
    assert episode_cost(tmp_path).tasks == episode_cost(tmp_path / "v1").tasks
