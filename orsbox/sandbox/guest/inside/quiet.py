"""`suppress`, as `contextlib.suppress` does it, for the guest's many "this may fail and
that is fine" calls. Why not contextlib: importing it costs the guest 0.9 MiB of memory
(it brings `functools`, `collections` and `types`), measured in python 3.11, for the
sandbox's whole life (docs/operating/sizing.md)."""


class suppress:  # lower case: it stands in for contextlib's
    """Leave the `with` block quietly on one of `errors`."""

    def __init__(self, *errors):
        self.errors = errors

    def __enter__(self):
        return None

    def __exit__(self, kind, value, traceback):
        return kind is not None and issubclass(kind, self.errors)
