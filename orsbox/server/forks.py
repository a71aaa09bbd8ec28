"""Fork: N new sessions from the current files of a live session (orsbox's extension).

`POST /orsbox/fork` with the source's `X-Session-ID` and `{"n": N}` saves the source
sandbox's filesystem (a snapshot, `orsbox.sandbox.snapshots`) and creates N sessions of
the same environment, task, secrets and toolset whose sandboxes start from it: the
building block for GRPO-style groups and tree search that branch after a common prefix.

* Files only: processes running in the source (background jobs, servers), its
  persistent shell's state (cwd, variables) and the environment object's in-memory
  state are not carried. The new sessions' `setup` starts the sandbox and does not run
  the environment's `prepare` again (its files are already there).
* The source is paused for the moment the copy takes, then goes on untouched.
* The new sessions are ordinary sessions in every other way: they start in the
  background like `/create`'s (requests wait for them the same way), have their own
  episode clock, inactivity timeout, limits and teardown, and count against
  `max_sessions`. The snapshot is removed once the last of them is gone.
* Unknown, deleted or failed sources answer with the ORS error form
  (`{"detail": ...}` and 404, 410 or 500), as any session request does.
"""

from __future__ import annotations

import uuid

from orsbox.authoring.container import ContainerEnvironment
from orsbox.errors import BadRequest, ServiceUnavailable
from orsbox.server.sessions import SessionManager


async def fork(sessions: SessionManager, sid: str, n: int, *, owner: str) -> list[str]:
    """Start `n` sessions from session `sid`'s files; return their ids. The source must
    be `owner`'s (another client's answers as an unknown one), and so are the new ones.
    The files are saved between the source's calls (it takes its turn on the session's
    call lock), so a fork never copies a call half done."""
    settings = sessions.settings
    if not 1 <= n <= settings.max_fork:
        raise BadRequest(f"n must be between 1 and {settings.max_fork} (max_fork), not {n}")
    source = sessions.get(sid, owner=owner)
    env = await sessions.environment(sid, owner=owner)
    if not isinstance(env, ContainerEnvironment):
        raise BadRequest(f"session {sid!r} has no sandbox to fork ({source.env_name})")
    if len(sessions) + n > settings.max_sessions:
        raise ServiceUnavailable(
            f"server at capacity: {len(sessions)} live sessions and {n} forks would pass "
            f"max_sessions ({settings.max_sessions})",
            headers={"Retry-After": str(settings.capacity_retry_after_s)},
        )
    async with source.call_lock:  # between calls: a whole call's files, never half
        shared = await env.snapshot(n)
    created: list[str] = []
    try:
        for _ in range(n):
            new_sid = str(uuid.uuid4())
            sessions.create(
                new_sid,
                source.env_name,
                source.env_cls,
                source.task_spec,
                source.secrets,
                source.toolset,
                start_from=shared,
                owner=source.owner,
            )
            created.append(new_sid)
    except BaseException:
        await shared.release(n - len(created))
        for new_sid in created:  # all or none: the caller learns no ids
            await sessions.delete(new_sid)
        raise
    return created
