"""The guest: the process inside each sandbox that runs its commands for the host (not
the LLM agent the sandbox serves), apart from any deployment: the script that runs inside
(`script.py`), how it gets there (`loader.py`), its framing and the host's connection to
it (`channel.py`), and the `Sandbox` built on it (`sandbox.py`). A backend supplies a
socket carrying the guest's stdin and stdout (and a `Demux` if its transport mixes in
stderr, as Docker's does), how to remove the sandbox and how to explain its death."""
