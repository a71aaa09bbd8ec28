"""The pieces of bounded folders that need no engine: tar rewriting, user lookup, and
the mount options (the real thing runs in tests/adversarial/test_disk.py)."""

from __future__ import annotations

import io
import tarfile

from orsbox.sandbox import SandboxLimits, SandboxSpec
from orsbox.sandbox.docker.disk import DiskPlan, Folder, _relative, _resolve_user
from orsbox.sandbox.docker.options import container_options

PASSWD = b"root:x:0:0:root:/root:/bin/bash\norsbox:x:1000:1001::/home/orsbox:/bin/bash\n"


def tar_of(entries: list[tuple[str, bytes | None]], link: tuple[str, str] | None = None) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        for name, data in entries:
            info = tarfile.TarInfo(name)
            if data is None:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
        if link:
            info = tarfile.TarInfo(link[0])
            info.type, info.linkname = tarfile.LNKTYPE, link[1]
            tar.addfile(info)
    return out.getvalue()


def test_docker_archives_become_relative_to_their_folder() -> None:
    archive = tar_of(
        [("workspace", None), ("workspace/src", None), ("workspace/src/a.py", b"x = 1\n")],
        link=("workspace/b.py", "workspace/src/a.py"),
    )
    with tarfile.open(fileobj=io.BytesIO(_relative(archive))) as tar:
        members = {m.name: m for m in tar}
        assert sorted(members) == ["b.py", "src", "src/a.py"]
        assert members["b.py"].linkname == "src/a.py"
        assert tar.extractfile("src/a.py").read() == b"x = 1\n"
    assert _relative(tar_of([("workspace", None)])) is None  # an empty folder
    assert _relative(None) is None


def test_users_resolve_through_the_images_passwd() -> None:
    passwd = tar_of([("passwd", PASSWD)])
    assert _resolve_user("orsbox", passwd) == (1000, 1001, "/home/orsbox")
    assert _resolve_user("1000", passwd) == (1000, 1001, "/home/orsbox")
    assert _resolve_user("orsbox:7", passwd) == (1000, 7, "/home/orsbox")
    assert _resolve_user("root", passwd) == (0, 0, "/root")
    assert _resolve_user("4242", passwd) == (4242, 4242, None)


def test_a_disk_plan_mounts_bounded_folders_on_a_read_only_root() -> None:
    plan = DiskPlan(
        size_bytes=1024,
        user="1000:1000",
        folders=(Folder("/workspace", 1000, 1000), Folder("/tmp", 0, 0)),
    )
    assert plan.owner(plan.folders[0]) is None and plan.owner(plan.folders[1]) == "0:0"
    spec = SandboxSpec(image="img", limits=SandboxLimits(disk_bytes=1024))
    options = container_options(spec, "n", {}, {}, tmpfs=plan.tmpfs())
    assert options["read_only"] is True
    assert options["tmpfs"] == {
        "/workspace": "size=1024,uid=1000,gid=1000,exec,nosuid,nodev",
        "/tmp": "size=1024,uid=0,gid=0,exec,nosuid,nodev",
    }
