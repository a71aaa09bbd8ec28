"""ORS on the wire: pydantic types, SSE framing, the reconnect buffer.

Imports nothing from orsbox but `orsbox.errors`."""
