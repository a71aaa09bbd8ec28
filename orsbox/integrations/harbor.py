"""orsbox as a Harbor environment: `harbor run -e orsbox.integrations.harbor:OrsboxEnvironment`.

Harbor (0.26, Python >= 3.12) loads this class by its import path, so orsbox must be
installed in Harbor's own virtual environment. Each trial's container is then an orsbox
sandbox, on the backend `ORSBOX_BACKEND` configures as for `orsbox serve` (the local
Docker engine by default) or, with `--ek url=... --ek token=...`, an API sandbox of an
orsbox server or cluster router. Harbor's environment contract is
start, exec, upload/download of files and folders, and stop; this class meets it with
the same handles the Inspect provider uses (`orsbox.integrations.handles`):

- in-process, the container runs in Harbor's execution profile, as orsbox's own Harbor
  loader runs it: Docker's default capabilities (so `apt-get` and `sudo` work), a
  writable root. An API sandbox gets the server's hardened profile (the sandbox API
  has no way to ask for more);
- the image is the task's `docker_image` (after orsbox's image map, `--ek
  image_map=FROM=TO,...`) or its `environment/Dockerfile`, built once (in-process only);
- `exec` runs `bash -c COMMAND` as Harbor's Docker environment does, with its cwd (the
  task's workdir by default), merged env and user, stdout and stderr apart;
- files move as tar archives extracted as root, so they are owned as `docker cp` leaves
  them;
- the sandbox starts with the network Harbor resolved for it: `no-network` gets none,
  `public` a guarded network of its own; allow-lists and per-phase switching are
  refused here (orsbox serves them for its own Harbor loader, `orsbox serve harbor:`).
"""

from __future__ import annotations

import io
import secrets
import shlex
import tarfile
from pathlib import Path
from typing import Any, ClassVar

from harbor.environments.base import BaseEnvironment, ExecResult
from harbor.environments.capabilities import EnvironmentCapabilities
from harbor.environments.options import EnvironmentOptions
from harbor.models.task.config import NetworkMode
from pydantic import Field, SecretStr

from orsbox.formats.harbor.images import task_image
from orsbox.integrations.handles import LocalSandbox, RemoteSandbox, SandboxHandle
from orsbox.integrations.sandbox_client import SandboxApiClient
from orsbox.integrations.streams import run_split
from orsbox.sandbox.base import SandboxBackend, SandboxLimits, SandboxSpec
from orsbox.sandbox.config import configured, create_backend, with_options
from orsbox.sandbox.image_map import ImageMap
from orsbox.sandbox.images import ensure_built

OUTPUT_CAP_BYTES = 64 * 1024 * 1024
FILE_LIMIT_BYTES = 1024**3
TYPE = "orsbox"


class OrsboxOptions(EnvironmentOptions):
    """`--ek` keys."""

    url: str | None = Field(default=None, description="an orsbox server or router")
    token: SecretStr | None = Field(default=None, description="its token")
    engine: str | None = Field(default=None, description="the local engine (no url)")
    runtime: str | None = Field(default=None, description="runc or runsc (no url)")
    image_map: str | None = Field(default=None, description="FROM=TO,... rewrite rules")


class OrsboxEnvironment(BaseEnvironment):
    """One Harbor trial's container as an orsbox sandbox."""

    options_model: ClassVar[type[EnvironmentOptions] | None] = OrsboxOptions

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._handle: SandboxHandle | None = None
        self._backend: SandboxBackend | None = None
        self._client: SandboxApiClient | None = None

    @staticmethod
    def type() -> str:
        return TYPE

    @property
    def capabilities(self) -> EnvironmentCapabilities:
        return EnvironmentCapabilities(disable_internet=True)

    @property
    def _options(self) -> OrsboxOptions:
        assert isinstance(self.options, OrsboxOptions)
        return self.options

    def _validate_definition(self) -> None:
        if self.task_env_config.docker_image:
            return
        if not (self.environment_dir / "Dockerfile").is_file():
            raise FileNotFoundError(
                f"{self.environment_dir}: no Dockerfile and no [environment].docker_image"
            )

    # -- lifecycle -------------------------------------------------------------------

    async def start(self, force_build: bool) -> None:
        mode = self.network_policy.network_mode
        if mode == NetworkMode.ALLOWLIST:
            raise ValueError(
                "the orsbox Harbor environment does not enforce allow-lists; serve the "
                "task with `orsbox serve harbor:...` (squid allow-lists) or use public"
            )
        limits = SandboxLimits(
            cpus=float(self._effective_cpus or 1),
            memory_bytes=(self._effective_memory_mb or 2048) * 1024**2,
            network=mode == NetworkMode.PUBLIC,
            privileges="runtime-default",  # Harbor's containers keep Docker's default set
        )
        if self._options.url:
            self._handle = await self._start_remote(limits)
        else:
            self._handle = await self._start_local(limits, force_build)
        # Harbor's folders (/logs/agent, /logs/verifier, ...) exist from the start, as
        # Harbor's Docker environment makes them after its container starts.
        await self.ensure_dirs(self._mount_targets(writable_only=True))

    async def _start_local(self, limits: SandboxLimits, force_build: bool) -> SandboxHandle:
        """On the backend ORSBOX_BACKEND configures (as the server's; Docker by default)
        with the options given laid over it, from the factory."""
        rules = [r for r in (self._options.image_map or "").split(",") if r.strip()]
        options = {"engine": self._options.engine, "runtime": self._options.runtime}
        config = with_options(configured(), **options, image_map=rules or None)
        self._backend = create_backend(config)
        spec = SandboxSpec(
            image=await self._image(self._backend, ImageMap.parse(config.image_map), force_build),
            limits=limits,
            env=self._merge_env(None) or {},
            labels={"orsbox.harbor.session": self.session_id},
        )
        return LocalSandbox(await self._backend.start(spec))

    async def _image(self, backend: SandboxBackend, image_map: ImageMap, force_build: bool) -> str:
        """The task's image as orsbox's own Harbor loader finds it (docker_image, the
        compose service or the Dockerfile, FROM lines through the image map), built
        here when it is a Dockerfile's."""
        found = task_image(
            self.environment_name,
            self.environment_dir,
            docker_image=self.task_env_config.docker_image,
            image_map=image_map,
            build_timeout_s=self.task_env_config.build_timeout_sec,
        )
        if found.recipe is not None:
            await ensure_built(backend.images, found.recipe, self.logger.debug, force=force_build)
        return found.tag

    async def _start_remote(self, limits: SandboxLimits) -> SandboxHandle:
        image = self.task_env_config.docker_image
        if not image:
            raise ValueError(
                "a task built from its Dockerfile needs the local engine; with --ek url, "
                "build its image on the server (`orsbox build`) and set docker_image"
            )
        token = self._options.token.get_secret_value() if self._options.token else None
        assert self._options.url is not None
        self._client = SandboxApiClient(self._options.url, token)
        settings = {
            "environment": f"harbor:{self.environment_name}"[:100],
            "image": image,
            "machine_size": f"{limits.cpus:g}:{limits.memory_bytes / 1024**3:g}",
            "env": self._merge_env(None) or None,
            "block_network": not limits.network,
        }
        return RemoteSandbox(self._client, await self._client.create(settings))

    async def stop(self, delete: bool) -> None:
        if self._handle is not None:
            await self._handle.close()
            self._handle = None
        if self._backend is not None:
            await self._backend.close()
        if self._client is not None:
            await self._client.aclose()

    # -- the contract ----------------------------------------------------------------

    async def exec(
        self,
        command: str,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        timeout_sec: int | None = None,
        user: str | int | None = None,
    ) -> ExecResult:
        user = self._resolve_user(user)
        outcome = await run_split(
            self._running(),
            ["bash", "-c", command],
            cwd=cwd or self.task_env_config.workdir or "",
            env=self._merge_env(env),
            user=None if user is None else str(user),
            timeout_s=timeout_sec,
            cap_bytes=OUTPUT_CAP_BYTES,
        )
        if outcome.timed_out:
            raise RuntimeError(f"Command timed out after {timeout_sec} seconds")
        return ExecResult(
            stdout=outcome.stdout, stderr=outcome.stderr, return_code=outcome.exit_code or 0
        )

    async def upload_file(self, source_path: Path | str, target_path: str) -> None:
        source = Path(source_path)
        target = Path(target_path)
        archive = _tar({target.name: source})
        await self._unpack(archive, str(target.parent))

    async def upload_dir(self, source_dir: Path | str, target_dir: str) -> None:
        source = Path(source_dir)
        members = {str(p.relative_to(source)): p for p in sorted(source.rglob("*"))}
        await self._unpack(_tar(members), target_dir)

    async def download_file(self, source_path: str, target_path: Path | str) -> None:
        target = Path(target_path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(await self._running().read(source_path, max_bytes=FILE_LIMIT_BYTES))

    async def download_dir(self, source_dir: str, target_dir: Path | str) -> None:
        spool = f"/tmp/.orsbox-download-{secrets.token_hex(8)}.tar"
        await self._root(f"tar -cf {spool} -C {shlex.quote(source_dir)} . && chmod 644 {spool}")
        try:
            data = await self._running().read(spool, max_bytes=FILE_LIMIT_BYTES)
        finally:
            await self._root(f"rm -f {spool}")
        target = Path(target_dir)
        target.mkdir(parents=True, exist_ok=True)
        with tarfile.open(fileobj=io.BytesIO(data)) as archive:
            archive.extractall(target, filter="data")

    # -- helpers ---------------------------------------------------------------------

    def _running(self) -> SandboxHandle:
        if self._handle is None:
            raise RuntimeError("the orsbox environment has not started")
        return self._handle

    async def _unpack(self, archive: bytes, target_dir: str) -> None:
        spool = f"/tmp/.orsbox-upload-{secrets.token_hex(8)}.tar"
        await self._running().write(spool, archive)
        await self._root(
            f"mkdir -p {shlex.quote(target_dir)} && "
            f"tar -xf {spool} --no-same-owner -C {shlex.quote(target_dir)}; "
            f"rc=$?; rm -f {spool}; exit $rc"
        )

    async def _root(self, script: str) -> None:
        outcome = await self._running().run(
            ["bash", "-c", script],
            stdin=None,
            cwd="",
            env={},
            user="root",
            timeout_s=600,
            cap_bytes=64 * 1024,
        )
        if outcome.exit_code != 0:
            raise RuntimeError(
                f"orsbox: {script!r} failed: {outcome.data.decode(errors='replace')}"
            )


def _tar(members: dict[str, Path]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for name, path in members.items():
            archive.add(path, arcname=name, recursive=False)
    return buffer.getvalue()
