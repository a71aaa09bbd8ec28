"""ORS on the wire: pydantic types, SSE framing, the reconnect buffer.

Imports nothing from orsbox but `orsbox.clock` (what the reconnect buffer's linger reads)."""
