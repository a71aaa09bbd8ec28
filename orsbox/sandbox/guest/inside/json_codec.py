"""The frames' JSON headers, read and written with json's C core (`_json`) rather than
the `json` package. Why: importing `json` costs the guest 1.1 MiB of memory (it brings
`re` and `enum`), measured in python 3.11, for the sandbox's whole life
(docs/operating/sizing.md). The host writes and reads the headers with `json` itself:
small objects of strings, numbers, booleans, null, arrays and objects.

A python without `_json`, or whose scanner wants more of its context than json.loads's
defaults below, uses the `json` package instead."""

INFINITY = 1e999  # float("inf") as a literal


class Defaults:
    """What `_json.make_scanner` reads of its context (a `json.JSONDecoder`): the
    defaults of `json.loads`."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int

    @staticmethod
    def parse_constant(name):
        return {"NaN": INFINITY - INFINITY, "Infinity": INFINITY, "-Infinity": -INFINITY}[name]


def loads(text):
    """The value of a JSON text, as `json.loads`; ValueError if it is not one value."""
    try:
        from _json import make_scanner

        # a small object, made per header (the guest keeps no module state)
        scan = make_scanner(Defaults())  # type: ignore[arg-type]  # duck-typed: a JSONDecoder's attributes
    except (ImportError, AttributeError, TypeError):
        import json

        return json.loads(text)
    try:
        value, end = scan(text, 0)
    except StopIteration as e:
        raise ValueError(f"not JSON at {e.value}") from None
    if end != len(text):
        raise ValueError(f"more than one JSON value: extra data at {end}")
    return value


def dumps(value):
    """The JSON text of `value`, as `json.dumps` writes it."""
    try:
        from _json import encode_basestring_ascii
    except ImportError:
        import json

        return json.dumps(value)
    return encoded(value, encode_basestring_ascii)


def encoded(value, quoted):
    if isinstance(value, str):
        return quoted(value)
    if value is None or value is True or value is False:
        return {None: "null", True: "true", False: "false"}[value]
    if isinstance(value, int):
        return int.__repr__(value)
    if isinstance(value, float):
        return number(value)
    if isinstance(value, dict):
        items = (quoted(str(k)) + ": " + encoded(v, quoted) for k, v in value.items())
        return "{" + ", ".join(items) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(encoded(v, quoted) for v in value) + "]"
    raise TypeError(f"not JSON: {type(value).__name__}")


def number(value):
    if value != value:
        return "NaN"
    if value in (INFINITY, -INFINITY):
        return "Infinity" if value > 0 else "-Infinity"
    return float.__repr__(value)
