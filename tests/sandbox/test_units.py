"""Pieces of the Docker backend that need no engine: output capture, framing, ownership."""

from __future__ import annotations

import os
import struct
import subprocess

import pytest

from orsbox.sandbox import HostMount, SandboxLimits, SandboxSpec
from orsbox.sandbox.docker.options import container_name, container_options
from orsbox.sandbox.docker.stream import DockerDemux
from orsbox.sandbox.guest.channel import FrameReader, encode_frame
from orsbox.sandbox.guest.inside.capture import Capture
from orsbox.sandbox.guest.loader import guest_argv
from orsbox.sandbox.host import owner as L


def test_capture_keeps_head_and_tail_within_the_cap() -> None:
    capture = Capture(100)
    for i in range(1000):
        capture.add(b"%04d\n" % i)
    output, truncated = capture.result()
    assert truncated and capture.total == 5000
    assert output.startswith(b"0000\n0001\n") and output.endswith(b"0998\n0999\n")
    assert b"4900 bytes cut" in output
    assert len(capture.head) + len(capture.tail) == 100


def test_capture_small_output_is_untouched() -> None:
    capture = Capture(100)
    capture.add(b"a" * 60)
    capture.add(b"b" * 40)
    assert capture.result() == (b"a" * 60 + b"b" * 40, False)


def test_capture_one_huge_chunk() -> None:
    capture = Capture(10)
    capture.add(b"x" * 5 + b"y" * 1_000_000 + b"z" * 5)
    output, truncated = capture.result()
    assert truncated and output.startswith(b"xxxxx\n") and output.endswith(b"zzzzz")


def docker_frame(stream: int, data: bytes) -> bytes:
    return struct.pack(">BxxxL", stream, len(data)) + data


def test_frame_reader_reassembles_split_frames() -> None:
    wire = encode_frame({"id": 1, "ok": True}, b"\x00payload\xff") + encode_frame({"id": 2})
    stream = docker_frame(1, wire[:5]) + docker_frame(2, b"a warning\n") + docker_frame(1, wire[5:])
    reader = FrameReader(DockerDemux())
    frames, errors = [], []
    for i in range(0, len(stream), 3):  # the worst case: three bytes at a time
        got, err = reader.feed(stream[i : i + 3])
        frames += got
        errors += err
    assert frames == [({"id": 1, "ok": True}, b"\x00payload\xff"), ({"id": 2}, b"")]
    assert errors == [b"a warning\n"]


def test_frame_reader_on_a_plain_byte_stream() -> None:
    """What a backend without Docker's multiplexing hands over: the guest's stdout."""
    wire = encode_frame({"id": 1, "ok": True}, b"\x00data") + encode_frame({"id": 2})
    reader = FrameReader()
    frames = [f for i in range(0, len(wire), 4) for f in reader.feed(wire[i : i + 4])[0]]
    assert frames == [({"id": 1, "ok": True}, b"\x00data"), ({"id": 2}, b"")]


def test_owner_liveness() -> None:
    mine = L.owner_labels("s")
    assert not L.owner_is_dead(mine)
    child = subprocess.Popen(["true"])
    child.wait()
    assert L.owner_is_dead({**mine, L.PID: str(child.pid)})
    assert L.owner_is_dead({**mine, L.PID_START: "1"})
    assert not L.owner_is_dead({**mine, L.PID: str(child.pid), L.HOST: "elsewhere"})
    assert not L.owner_is_dead({})


def test_an_owner_in_another_pid_namespace_is_never_judged() -> None:
    """A server in a container with this host's name: its pid means nothing here."""
    mine = L.owner_labels("s")
    assert mine[L.PID_NAMESPACE].isdigit()  # `pid:[4026531836]` as a label value
    child = subprocess.Popen(["true"])
    child.wait()
    gone_here = {**mine, L.PID: str(child.pid)}
    assert L.owner_is_dead(gone_here)
    for elsewhere in (
        {**gone_here, L.PID_NAMESPACE: "1"},
        {**gone_here, L.PID_NAMESPACE: "pid:[1]"},
    ):
        assert not L.owner_is_dead(elsewhere) and not L.owner_is_here(elsewhere)
    assert L.owner_is_dead({k: v for k, v in gone_here.items() if k != L.PID_NAMESPACE})


def test_owner_labels_are_kubernetes_labels_and_older_ones_are_still_read() -> None:
    """Values Kubernetes takes, whatever the ids; a label of an older server (the pid
    namespace as /proc names it, ids as they were) names the same owner."""
    from tests.sandbox.test_labels import kubernetes_takes_key, kubernetes_takes_value

    server = "cell:7/" + "s" * 80
    labels = L.sandbox_labels(server, "3f2a.cell:1", {"orsbox.environment": "math"})
    assert all(kubernetes_takes_key(k) and kubernetes_takes_value(v) for k, v in labels.items())
    assert L.is_mine(labels, server) and not L.is_mine(labels, server + "x")
    namespace = os.readlink("/proc/self/ns/pid")
    former = {**labels, L.SERVER: server, L.PID_NAMESPACE: namespace}
    assert namespace.startswith("pid:[") and L.is_mine(former, server)
    assert L.owner_is_here(former) and L.owner_state(former) == "alive"


def test_container_defaults_and_overrides() -> None:
    spec = SandboxSpec(image="img", limits=SandboxLimits(memory_bytes=2**28, cpus=0.5, pids=64))
    name = container_name("a/b c")
    assert name.startswith("orsbox-a-b-c-")
    options = container_options(spec, name, {"orsbox": "1"}, {"init": False})
    assert options["network_mode"] == "none" and options["cap_drop"] == ["ALL"]
    assert options["mem_limit"] == options["memswap_limit"] == 2**28
    assert options["nano_cpus"] == 500_000_000 and options["pids_limit"] == 64
    assert options["security_opt"] == ["no-new-privileges"] and options["auto_remove"]
    assert options["init"] is False and "user" not in options
    assert "privileged" not in options and "mounts" not in options
    # the guest is the command, stdin open once: the attach's end is the container's
    assert options["command"] == guest_argv() and "--sub" not in options["command"]
    assert options["stdin_open"] is True and options["detach"] is False
    assert options["log_config"]["type"] == "none"


def test_docker_default_privileges_keep_dockers_set_and_the_other_limits() -> None:
    limits = SandboxLimits(privileges="runtime-default", writable_layer_bytes=2**20, pids=64)
    options = container_options(SandboxSpec(image="img", limits=limits), "n", {}, {})
    assert "cap_drop" not in options and "security_opt" not in options
    assert options["pids_limit"] == 64 and options["init"] is True
    assert options["read_only"] is False and "tmpfs" not in options  # the root stays writable


def test_what_only_an_operator_allows_reaches_the_container_options() -> None:
    mount = HostMount(source="/srv/data", target="/data")
    limits = SandboxLimits(network="host", privileged=True, mounts=(mount,))
    options = container_options(SandboxSpec(image="img", limits=limits), "n", {}, {})
    assert options["network_mode"] == "host" and options["privileged"] is True
    (bind,) = options["mounts"]
    assert (bind["Source"], bind["Target"], bind["Type"]) == ("/srv/data", "/data", "bind")
    assert bind["ReadOnly"] is True
    bridged = SandboxSpec(image="img", limits=SandboxLimits(network=True))
    guarded = container_options(bridged, "n", {}, {}, network="orsbox-guarded")
    assert guarded["network_mode"] == "orsbox-guarded"  # never Docker's default bridge
    with pytest.raises(ValueError, match="needs its network"):
        container_options(bridged, "n", {}, {})


def test_a_person_enters_a_sandbox_through_its_engine() -> None:
    """`login_command` (Inspect's human agent): the engine it was configured with, if any."""
    from orsbox.sandbox.docker import DockerBackend
    from orsbox.sandbox.docker.config import DockerConfig

    elsewhere = DockerBackend("t", config=DockerConfig(engine="unix:///nowhere.sock"))
    assert elsewhere.login_command("abc", "root") == (
        "docker -H unix:///nowhere.sock exec -it --user root abc bash -l"
    )
    assert DockerBackend("t").login_command("abc") == "docker exec -it abc bash -l"
