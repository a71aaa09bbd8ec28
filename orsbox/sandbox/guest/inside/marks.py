"""Marks in the environment of what the shell and each one-off exec start: how their
processes are known after leaving the process tree (`setsid` in a double fork)."""

from .processes import ancestry_root

SHELL_MARK_NAME = "ORSBOX_SHELL"  # set in the shell's environment, so inherited by what it starts
SHELL_MARK = SHELL_MARK_NAME.encode() + b"=1\0"


EXEC_MARK_NAME = "ORSBOX_EXEC"  # set per one-off exec, to its request id


def carries_mark(pid, mark):
    """Whether the process started with `mark` (`NAME=value\\0`) in its environment: how
    a process the shell or an exec started is known after it has left that tree and
    session (`setsid` in a double fork). One that cleared its environment is not
    recognised; it still dies with the sandbox."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return mark in b"\0" + f.read()
    except OSError:
        return False


def escaped_from_shell(table, mark=SHELL_MARK):
    """Orphans the shell (or, with an exec's `mark`, that exec) started (their oldest
    living ancestor's parent is init), with everything they started. Not the
    container's own command, the guest or another's orphans: none carries the mark."""
    marked = {}
    out = []
    for pid in table:
        root = ancestry_root(pid, table, ())
        if root not in table or table[root][0] != 1:
            continue
        if root not in marked:
            marked[root] = carries_mark(root, mark)
        if marked[root]:
            out.append(pid)
    return out
