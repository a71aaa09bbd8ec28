"""orsbox inside the harnesses people already run.

Each integration lets a harness keep its own tasks, datasets and scorers and get orsbox's
sandboxes (hardened or gVisor isolation, a cluster behind one URL, episode records):

    inspect/         a sandbox provider for Inspect (`sandbox="orsbox"`)
    handles, streams  a sandbox in-process or on a server behind one interface, and its
                     stdout and stderr apart (what every harness asks of a sandbox)
    sandbox_client   an asyncio client of orsbox's sandbox API, shared by the integrations
                     that drive a remote orsbox server or cluster router

This layer sits beside the CLI: it may use everything below it, and nothing in orsbox
imports it (the harnesses load it through their own entry points).
"""
