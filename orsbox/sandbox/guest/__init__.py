"""The guest: the process inside each sandbox that runs its commands for the host (not
the LLM agent the sandbox serves), apart from any deployment: its code, run inside
(`inside/`, a package of modules), that package as one payload built once per server
process (`payload.py`), how it is started there (`loader.py`), its greeting and the
sub-guests of `exec(user=...)` (`start.py`), its framing and the host's connection to it
(`channel.py`), and the `Sandbox` built on it (`sandbox.py`). A backend supplies a
socket carrying the guest's stdin and stdout (and a `Demux` if its transport mixes in
stderr, as Docker's does), how to start a process in the sandbox as a user, how to
remove the sandbox and how to explain its death."""
