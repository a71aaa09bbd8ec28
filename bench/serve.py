"""Run one benchmark server: `python -m bench.serve orsbox|ors PORT ENV...`.

Both kinds run under uvicorn with the same options (log level warning, so neither
writes an access line per request); orsbox through its own runner, exactly as
`orsbox serve` does, with any `ORSBOX_*` settings from the environment.
"""

from __future__ import annotations

import os
import sys

import uvicorn


def main(kind: str, port: int, names: list[str]) -> None:
    if kind == "ors":
        import ors

        from bench.envs import echo_env

        app = ors.Server([echo_env(ors)]).app
        uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", timeout_keep_alive=60)
        return
    from orsbox.serving import serve
    from orsbox.settings import Settings

    environments = [env for name in names for env in _environments(name)]
    settings = Settings(host="127.0.0.1", port=port)
    if "ORSBOX_LOG_LEVEL" not in os.environ:
        settings = settings.model_copy(update={"log_level": "warning"})
    serve(environments, settings)


def _environments(name: str) -> list[type]:
    """A class of bench/envs.py by name, or a target as `orsbox serve` reads it
    (`harbor:PATH`, with ORSBOX_IMAGE_MAP)."""
    import bench.envs

    if ":" not in name and "/" not in name:
        return [getattr(bench.envs, name)]
    from orsbox.formats import FormatOptions
    from orsbox.sandbox.image_map import ImageMap
    from orsbox.targets import resolve_target

    return list(resolve_target(name, FormatOptions(image_map=ImageMap.from_env())))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3:])
