"""The `orsbox` command line: one module per command, assembled in `main`."""
