"""A cached setup: the second episode of a task against `docker run -d` of the same image.

The environment is a manifest (written to a temporary folder) on `orsbox/swe:latest`
whose `[setup]` copies a local Python package with a C extension in and installs it
with `pip install --no-index` (a compile of several seconds: the "~10 s setup" of issue
17), `cache = true`. The first episode of the task runs the setup and saves the state;
every later one starts from it. Measured, interleaved sample by sample:

* orsbox, first episode: `/create` -> first call answered, setup included (once per
  fresh key: each sample uses a new task, so the setup runs each time);
* orsbox, cached: `/create` -> first call answered for the task already saved;
* SDK `docker run -d` (create + start, init, no network) of the same image, and the same
  + one `exec true`.

Target (issue 17): cached p50 <= `run -d` p50 + 100 ms. Saved states are removed at the
end (`orsbox gc --setup-snapshots --environment ...` does the same by hand)."""

from __future__ import annotations

import asyncio
import json
import shutil
import tempfile
import time
import uuid
from pathlib import Path

from bench import coldstart
from bench.client import Connection
from bench.harness import Bench, Session, load
from bench.stats import Row, ms, summary

IMAGE = "orsbox/swe:latest"
FUNCTIONS = 1200  # compile work of the package's C extension: ~10 s setup here
SETUP = (
    "python3 -m pip install --no-index --no-build-isolation --user "
    "--break-system-packages /tmp/pkg >/tmp/pip.log 2>&1 || { cat /tmp/pip.log; exit 1; }"
)


def write_package(folder: Path) -> None:
    """`bigpkg`: one C extension of `FUNCTIONS` small functions, built by setuptools."""
    (folder / "bigpkg").mkdir(parents=True)
    funcs = "\n".join(
        f"static double f{i}(double x){{double s=0;for(int k=1;k<{i % 7 + 3};k++)"
        f"{{s+=x*k/(k+{i}.0)-s*0.5;}}return s+{i};}}"
        for i in range(FUNCTIONS)
    )
    table = ",".join(f"f{i}" for i in range(FUNCTIONS))
    (folder / "speed.c").write_text(
        "#define PY_SSIZE_T_CLEAN\n#include <Python.h>\n"
        f"{funcs}\nstatic double (*T[])(double)={{{table}}};\n"
        "static PyObject* total(PyObject* self, PyObject* args){double x;"
        'if(!PyArg_ParseTuple(args,"d",&x)) return NULL; double s=0;'
        f"for(int i=0;i<{FUNCTIONS};i++) s+=T[i](x); return PyFloat_FromDouble(s);}}\n"
        'static PyMethodDef M[]={{"total",total,METH_VARARGS,""},{NULL,NULL,0,NULL}};\n'
        'static struct PyModuleDef D={PyModuleDef_HEAD_INIT,"_speed",NULL,-1,M};\n'
        "PyMODINIT_FUNC PyInit__speed(void){return PyModule_Create(&D);}\n"
    )
    (folder / "bigpkg" / "__init__.py").write_text("from bigpkg._speed import total\n")
    (folder / "setup.py").write_text(
        "from setuptools import setup, Extension\n"
        'setup(name="bigpkg", version="1.0", packages=["bigpkg"], ext_modules=['
        'Extension("bigpkg._speed", ["speed.c"], extra_compile_args=["-O2"])])\n'
    )


def write_environment(folder: Path, name: str, tasks: int) -> Path:
    write_package(folder / "pkg")
    lines = "".join(json.dumps({"n": i}) + "\n" for i in range(tasks))
    (folder / "tasks.jsonl").write_text(lines)
    (folder / "orsbox.toml").write_text(
        f'name = "{name}"\nimage = "{IMAGE}"\nprompt = "task {{n}}"\ntools = ["bash"]\n'
        '[[splits]]\nname = "test"\ntasks = "tasks.jsonl"\n'
        f'[setup]\ncopy = {{ "pkg" = "/tmp/pkg" }}\nrun = "{SETUP}"\n'
        "timeout_s = 600\ncache = true\n"
        '[grader]\ncommand = "true"\n'
    )
    return folder


async def episode(url: str, env: str, index: int, check: bool = False) -> float:
    """`/create` of task `index` -> a first `bash` call answered, in ms."""
    conn = await Connection.open(url)
    sid = uuid.uuid4().hex
    started = time.perf_counter()
    body = {"env_name": env, "split": "test", "index": index}
    r = await conn.request("POST", "/create", body, {"X-Session-ID": sid})
    assert r.status == 200, r.body
    session = Session(conn, sid, env)
    assert await session.bash("echo hi") == "hi\n"
    elapsed = (time.perf_counter() - started) * 1000
    if check:  # the package the setup installed is there
        assert "bigpkg" in await session.bash("python3 -c 'import bigpkg; print(bigpkg.__name__)'")
    await session.delete()
    return elapsed


async def run(bench: Bench) -> list[Row]:
    repeats = bench.scale(12, 3)
    fresh_repeats = bench.scale(3, 1)
    name = f"bench-prep-{bench.run_id}"
    folder = Path(tempfile.mkdtemp(prefix="orsbox-bench-prepared-"))
    write_environment(folder, name, tasks=fresh_repeats + 1)
    server = bench.start_server("prepared", [str(folder)], setup_wait_s=900)
    samples: dict[str, list[float]] = {
        "first episode (setup runs)": [],
        "cached": [],
        "sdk run -d": [],
        "sdk run -d + exec": [],
    }
    loads = [load()]
    try:
        samples["first episode (setup runs)"].append(await episode(server.url, name, 0, True))
        await episode(server.url, name, 0, check=True)  # warm-up, and the cache works
        for _ in range(2):  # warm-up of the baseline
            await asyncio.to_thread(coldstart.sdk_run, bench, False, IMAGE)
        for i in range(repeats):
            samples["cached"].append(await episode(server.url, name, 0))
            samples["sdk run -d"].append(
                await asyncio.to_thread(coldstart.sdk_run, bench, False, IMAGE)
            )
            samples["sdk run -d + exec"].append(
                await asyncio.to_thread(coldstart.sdk_run, bench, True, IMAGE)
            )
            if i < fresh_repeats - 1:
                fresh = await episode(server.url, name, i + 1)
                samples["first episode (setup runs)"].append(fresh)
        loads.append(load())
    finally:
        await bench.stop(server)
        await asyncio.to_thread(remove_saved_states, bench, name)
        shutil.rmtree(folder, ignore_errors=True)
    stats = {k: summary(v) for k, v in samples.items()}
    bench.raw["prepared"] = {"create_to_first_call_ms": stats, "load": loads}
    return rows(stats, loads)


def remove_saved_states(bench: Bench, env: str) -> None:
    labels = ["orsbox.snapshot=prepared", f"orsbox.environment={env}"]
    for image in bench.docker.api.images(filters={"label": labels}):
        bench.docker.api.remove_image(image["Id"], force=True)


def rows(stats: dict[str, dict[str, float]], loads: list[str]) -> list[Row]:
    run_p50 = stats["sdk run -d"]["p50"]
    baseline = (
        f"run -d {ms(run_p50)}, run -d + exec {ms(stats['sdk run -d + exec']['p50'])} "
        f"(load {' -> '.join(loads)})"
    )
    cached, first = stats["cached"], stats["first episode (setup runs)"]
    return [
        Row(
            "prepared",
            "cached setup: create -> first call p50 (p95)",
            f"{ms(cached['p50'])} ({ms(cached['p95'])})",
            baseline,
            f"≤ run -d + 100 ms ({ms(run_p50 + 100)})",
            cached["p50"] <= run_p50 + 100,
        ),
        Row(
            "prepared",
            "first episode, setup runs: create -> first call p50",
            ms(first["p50"]),
            "",
        ),
    ]
