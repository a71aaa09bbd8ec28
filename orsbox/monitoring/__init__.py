"""The operator's view of a server: Prometheus metrics (`metrics`), the record of every
episode (`episodes`), sandbox starts counted whatever the backend (`metered_backend`)
and JSON log lines (`logs`). The server feeds them through one `Observer`
(`orsbox.server.observer`) at each step of a session's life and serves them at
`/metrics` and the status page (`orsbox.server.routes.status`); none of these modules
imports the server, so `orsbox episodes` reads the record without loading it."""
