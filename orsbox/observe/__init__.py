"""The operator's view of a server: Prometheus metrics (`metrics`), usage per session
and the record of every episode (`episodes`), all fed by one `Observer` the server
calls at each step of a session's life (`observer`), and JSON log lines (`logs`)."""
