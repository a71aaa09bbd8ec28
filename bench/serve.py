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
    import bench.envs
    from orsbox.runner import serve
    from orsbox.settings import Settings
    from orsbox.targets import resolve_target

    # a bench environment by name, or a target as `orsbox serve` takes it (swebench:FILE)
    environments = [
        cls
        for name in names
        for cls in ([getattr(bench.envs, name)] if ":" not in name else resolve_target(name))
    ]
    settings = Settings(host="127.0.0.1", port=port)
    if "ORSBOX_LOG_LEVEL" not in os.environ:
        settings = settings.model_copy(update={"log_level": "warning"})
    serve(environments, settings)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3:])
