"""What a cacheable setup's outcome depends on, as data for the cache key.

`ContainerEnvironment.setup_inputs` gathers it; `orsbox.sandbox.setup_snapshots` hashes it with
the environment's name and the image's id. A host folder copied in counts by each
file's path, size, modification time and mode (what `make` and `rsync` judge by):
reading every byte of a large folder on each episode's start would cost more than
the cache saves.
"""

from __future__ import annotations

import os
from pathlib import Path

CONTEXT_SETUP_SNAPSHOTS = "setup_snapshots"  # EnvironmentContext.extras key of the server's store


def folder_fingerprint(folder: Path) -> list[tuple[str, int, int, int]]:
    """(relative path, size, mtime in ns, mode) of everything under `folder`, sorted."""
    entries = []
    for root, dirs, files in os.walk(folder):
        dirs.sort()
        for name in sorted([*dirs, *files]):
            path = Path(root) / name
            stat = path.lstat()
            relative = str(path.relative_to(folder))
            entries.append((relative, stat.st_size, stat.st_mtime_ns, stat.st_mode))
    return entries
