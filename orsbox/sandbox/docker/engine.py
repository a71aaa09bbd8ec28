"""Every call to the Docker engine, off the event loop, with a deadline, translated.

The docker SDK is blocking, so each call runs in a worker thread bounded by a dedicated
`anyio.CapacityLimiter` (a burst of session starts must not starve the process-wide
default pool other code uses). The client's connection pool is larger than the limiter,
so concurrent callers never hit "Connection pool is full" and never wait on each other
for a connection. Every request has the client timeout as its deadline.

This is the one place where docker and requests exceptions become the `SandboxError`
family: NotFound -> SandboxGone, unreachable engine -> SandboxError naming it, any other
API error -> SandboxError with docker's explanation. Callers add context (a failed
start is re-raised as SandboxStartError by the backend).
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import functools
import logging
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Protocol, TypeVar, cast

import anyio
import docker
import docker.errors
import requests
import requests.exceptions
import urllib3.exceptions
from docker.constants import MINIMUM_DOCKER_API_VERSION
from docker.models.containers import _create_container_args  # type: ignore[attr-defined]  # private, not in the stubs

from orsbox.errors import ImageNotFound, SandboxError, SandboxGone
from orsbox.sandbox.usage import ResourceUsage, cgroup_usage, from_docker_stats

DOCKER_TIMEOUT_S = 60.0  # per API request; a burst of 50 creates takes ~8 s on 2 cores
MAX_CONCURRENT_CALLS = 64
POOL_SIZE = MAX_CONCURRENT_CALLS + 16
REMOVE_WAIT_S = 30.0  # how long to wait for a removal already in progress
REMOVE_SLOW_S = 300.0  # ... and for one that outlasted a read timeout (a bomb's end)
KILL_RETRY_S = 0.2  # between removals refused because the engine had not seen a kill end
SLOW_REMOVE_S = 10.0  # a removal past this is logged (usually well under a second)
ARCHIVE_TIMEOUT_S = 300.0  # a whole archive read (each read within it: DOCKER_TIMEOUT_S)

T = TypeVar("T")
log = logging.getLogger("orsbox.sandbox.docker.engine")


class RequestHelpers(Protocol):
    """The SDK's private request helpers (`docker.api.client.APIClient`), which keep its
    timeout and error mapping on a request it has no method for; its stubs leave them
    out."""

    def _url(self, pathfmt: str, *args: str, versioned_api: bool = True) -> str: ...
    def _get(self, url: str, **kwargs: Any) -> requests.Response: ...
    def _result(self, response: requests.Response, json: bool = False) -> Any: ...
    def _raise_for_status(self, response: requests.Response) -> None: ...


def request_helpers(api: docker.APIClient) -> RequestHelpers:
    return cast(RequestHelpers, api)


def _kill_not_yet_seen(e: docker.errors.APIError) -> bool:
    """Whether a forced removal failed only because the engine had not yet seen its kill
    end the container: its process already dead (a zombie) when docker, 10 s after the
    kill, tried SIGKILL itself. Asked again, the engine removes it at once. Seen when
    the host's OOM killer ended a gVisor sandbox's processes (docs/gvisor.md, 'oom')."""
    return "is zombie and can not be killed" in str(e.explanation or "")


def _read_timed_out(e: requests.exceptions.ConnectionError) -> bool:
    """Whether `e` is a read that outlived its timeout rather than an engine out of reach.
    requests raises a timeout met while reading an answer's body (the engine's `wait`
    sends its headers at once, its body when the container stops) as ConnectionError
    around urllib3's ReadTimeoutError, not as its own Timeout (docker/docker-py#1966)."""
    return bool(e.args) and isinstance(e.args[0], urllib3.exceptions.ReadTimeoutError)


@contextlib.contextmanager
def translated(what: str) -> Iterator[None]:
    """Re-raise docker/requests failures of `what` as orsbox errors."""
    try:
        yield
    except docker.errors.ImageNotFound as e:
        raise ImageNotFound(f"{what}: image not found: {e.explanation}") from None
    except docker.errors.NotFound as e:
        raise SandboxGone(f"{what}: not found: {e.explanation}") from None
    except docker.errors.APIError as e:
        raise SandboxError(f"{what}: docker said: {e.explanation or e}") from None
    except (requests.exceptions.RequestException, docker.errors.DockerException) as e:
        raise SandboxError(f"{what}: docker engine unreachable: {e}") from None


def read_archive(
    api: docker.APIClient, container_id: str, path: str, max_bytes: int | None = None
) -> bytes:
    """A tar of `path` in the container, read with a deadline for each read and for the
    whole. (The SDK's `get_archive` turns the socket timeout off before the body, so an
    engine that hangs mid-answer would hold the thread forever.) With `max_bytes`,
    reading stops once more than that has arrived. Raises docker's NotFound."""
    helpers = request_helpers(api)  # the SDK's own: its timeout stays on
    response = helpers._get(
        helpers._url("/containers/{0}/archive", container_id),
        params={"path": path},
        stream=True,
        headers={"Accept-Encoding": "identity"},
    )
    with contextlib.closing(response):
        helpers._raise_for_status(response)
        deadline = time.monotonic() + ARCHIVE_TIMEOUT_S
        data = bytearray()
        for chunk in response.iter_content(65536, decode_unicode=False):
            data += chunk
            if max_bytes is not None and len(data) > max_bytes:
                break
            if time.monotonic() > deadline:
                raise SandboxError(f"reading {path}: no whole answer in {ARCHIVE_TIMEOUT_S:g}s")
        return bytes(data)


def read_usage(api: docker.APIClient, container_id: str, pid: int) -> ResourceUsage | None:
    """A container's usage from its cgroup files when this host can read them (`pid`:
    its first process), else from the engine's stats (a remote engine, a runtime with
    its own accounting). Blocking; raises docker's errors."""
    found = cgroup_usage(pid) if pid > 0 else None
    if found is not None:
        return found
    return from_docker_stats(api.stats(container_id, stream=False, one_shot=True))


class Engine:
    """A docker client used only from worker threads. Created lazily: building a client
    asks the engine for its API version, which must not happen on the event loop."""

    def __init__(
        self, client: docker.DockerClient | None = None, address: str | None = None
    ) -> None:
        """`address`: the engine's (see `orsbox.sandbox.config.engine_address`);
        None: DOCKER_HOST, else the local socket."""
        self._client = client
        self.address = address
        self._owns_client = client is None
        self._client_lock = threading.Lock()
        self.limiter = anyio.CapacityLimiter(MAX_CONCURRENT_CALLS)
        self.last_answer = -float("inf")  # monotonic time of the last call that succeeded
        self._ping_since: float | None = None  # when the ping in flight started
        self._pids: dict[str, int] = {}  # container id -> its first process (for usage)
        # container id -> set when its commit (paused) ends: no exec starts meanwhile
        self._paused: dict[str, asyncio.Event] = {}
        # What answers (`engine_product`): asked when the client connects, so it is
        # known after the first call of any kind (a server's start-up sweep is one)
        self.product: str | None = None

    @property
    def client(self) -> docker.DockerClient:
        with self._client_lock:
            if self._client is None:
                client = connect(self.address)
                with translated("ask the docker engine what it is"):
                    self.product = answering_product(client)
                self._client = client
            return self._client

    async def product_name(self) -> str:
        """`Docker 28.2.2` or `Podman 4.3.1`, asked once."""
        if self.product is None:
            self.product = await self.run(
                "ask the engine what it is", answering_product, self.client
            )
        return self.product

    async def run(
        self, what: str, fn: Callable[..., T], *args: Any, abandon_on_cancel: bool = False
    ) -> T:
        """Run `fn(*args)` in a worker thread; translate its docker errors. A thread
        cannot be interrupted: a caller's deadline (`anyio.fail_after`) takes effect
        during the call only with `abandon_on_cancel`, for calls whose late result may
        be dropped (the thread ends at its own request timeout)."""

        def call() -> T:
            with translated(what):
                result = fn(*args)
            self.last_answer = time.monotonic()
            return result

        return await anyio.to_thread.run_sync(
            call, limiter=self.limiter, abandon_on_cancel=abandon_on_cancel
        )

    # -- calls

    async def ping(self) -> None:
        """Abandoned if the caller stops waiting: a health check must answer on time.
        While an abandoned ping still waits for a hung engine, no second one starts
        (each would hold a worker thread until its request timeout)."""
        if self._ping_since is not None:
            waited = time.monotonic() - self._ping_since
            raise SandboxError(f"docker engine not answering: a ping has waited {waited:.0f}s")
        self._ping_since = time.monotonic()

        def ping() -> None:
            try:
                self.client.ping()
            finally:
                self._ping_since = None

        await self.run("ping", ping, abandon_on_cancel=True)

    async def image_exists(self, image: str) -> bool:
        def exists() -> bool:
            try:
                self.client.images.get(image)
            except docker.errors.ImageNotFound:
                return False
            return True

        return await self.run(f"look up image {image}", exists)

    async def create(self, options: dict[str, Any]) -> str:
        """Create a container from `containers.run`-style options; return its id."""

        def create() -> str:
            # The low-level call: `containers.create` also inspects the new container,
            # an engine round trip per start whose answer we never use.
            api = self.client.api
            return api.create_container(
                **_create_container_args({**options, "version": api.api_version})
            )["Id"]

        return await self.run(f"create container for {options.get('image')}", create)

    async def inspect_image(self, image: str) -> dict[str, Any]:
        return await self.run(f"inspect image {image}", self.client.api.inspect_image, image)

    async def get_archive(
        self, container_id: str, path: str, max_bytes: int | None = None
    ) -> bytes | None:
        """A tar of `path` in the container (from its image while it is not started);
        None when there is no such path. With `max_bytes`, reading stops once more than
        that has arrived: a longer answer means "too large", cut anywhere."""

        def read() -> bytes | None:
            try:
                return read_archive(self.client.api, container_id, path, max_bytes)
            except docker.errors.NotFound:
                return None

        return await self.run(f"read {path} from container", read)

    async def put_archive(self, container_id: str, path: str, archive: bytes) -> None:
        """Unpack the tar `archive` at `path` in the container (started or not)."""
        put = functools.partial(self.client.api.put_archive, container_id, path, archive)
        await self.run(f"copy into {path} in container", put)

    async def wait_stopped(self, container_id: str, timeout_s: float) -> None:
        """Wait up to `timeout_s` for the container to stop by itself or be gone; past
        it, return all the same (the caller removes it either way). One request, the
        engine's `wait` (condition not-running)."""

        def wait() -> None:
            # gone already (auto_remove), or still running past it: removed as before
            try:
                self.client.api.wait(container_id, timeout=int(timeout_s), condition="not-running")
            except (docker.errors.NotFound, requests.exceptions.Timeout):
                pass
            except requests.exceptions.ConnectionError as e:
                if not _read_timed_out(e):
                    raise

        await self.run("wait for the container to stop", wait)

    async def inspect(self, container_id: str) -> dict[str, Any]:
        return await self.run("inspect container", self.client.api.inspect_container, container_id)

    async def layer_size(self, container_id: str) -> int:
        """Bytes the container added to its image's files (its writable layer): docker's
        `SizeRw`, which the engine computes by walking the layer (~15-30 ms here)."""

        def size() -> int:
            api = request_helpers(self.client.api)
            url = api._url("/containers/{0}/json", container_id)
            found = api._result(api._get(url, params={"size": 1}), True)
            return int(found.get("SizeRw") or 0)

        return await self.run("measure the container's writable layer", size)

    async def usage(self, container_id: str) -> ResourceUsage | None:
        """The container's CPU and peak memory (see `read_usage`); its first process is
        looked up once. Abandoned when the caller stops waiting (accounting never holds
        up a session's end behind a hung engine)."""
        pid = self._pids.get(container_id)
        if pid is None:
            inspect = self.client.api.inspect_container
            found = await self.run(
                "inspect container", inspect, container_id, abandon_on_cancel=True
            )
            pid = self._pids[container_id] = int((found.get("State") or {}).get("Pid") or 0)
        usage = cgroup_usage(pid) if pid > 0 else None  # a few small sysfs reads
        if usage is not None:
            return usage
        api = self.client.api
        return await self.run(
            "read stats", read_usage, api, container_id, 0, abandon_on_cancel=True
        )

    def forget(self, container_id: str) -> None:
        self._pids.pop(container_id, None)

    async def list(self, labels: list[str]) -> list[dict[str, Any]]:
        fn = functools.partial(self.client.api.containers, all=True, filters={"label": labels})
        return await self.run("list containers", fn)

    async def switch_network(self, container_id: str, network: str) -> None:
        """Leave every network the container is on and join `network` ("none": only a
        loopback interface; "bridge": docker's default, with outbound access)."""

        def switch() -> None:
            api = self.client.api
            attached = api.inspect_container(container_id)["NetworkSettings"]["Networks"] or {}
            if set(attached) == {network}:
                return
            for name in attached:
                api.disconnect_container_from_network(container_id, name, force=True)
            api.connect_container_to_network(container_id, network)

        await self.run(f"switch the network of container to {network}", switch)

    async def kill(self, container_id: str) -> None:
        """SIGKILL the container; one gone by the time the engine answers counts as
        killed."""
        await self.run("kill container", self._kill, container_id)

    def _kill(self, container_id: str) -> None:
        api = self.client.api
        try:
            api.kill(container_id)
        except docker.errors.APIError:
            # Podman answers 500 "no such container" when the kill ended an auto-remove
            # container before the answer was written.
            try:
                api.inspect_container(container_id)
            except docker.errors.NotFound:
                return
            raise

    async def remove(self, container_id: str) -> None:
        """Force-remove; a container already gone or being removed counts as removed.
        Returns once the engine no longer lists it. A slow one is logged: the delete
        or teardown waiting for it is the engine's, and nothing else would say so."""
        started = time.monotonic()
        try:
            await self.run("remove container", self._remove_and_wait, container_id)
        finally:
            took = time.monotonic() - started
            if took > SLOW_REMOVE_S:
                log.warning(
                    "the engine took %.1f s to remove container %s", took, container_id[:12]
                )

    def _remove_and_wait(self, container_id: str) -> None:
        try:
            self._remove_with(self.client.api, container_id, REMOVE_WAIT_S)
        except requests.exceptions.ReadTimeout:
            # Ending hundreds of processes (a stopped fork bomb under gVisor) has kept
            # the engine past the client's read timeout: ask again on a patient client.
            with self.patient_client(REMOVE_SLOW_S) as client:
                self._remove_with(client.api, container_id, REMOVE_SLOW_S)

    @staticmethod
    def _remove_with(api: Any, container_id: str, wait_s: float) -> None:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                api.remove_container(container_id, force=True)
                return
            except docker.errors.NotFound:
                return
            except docker.errors.APIError as e:
                if e.status_code == 409:  # removal already in progress (auto_remove)
                    break
                if not _kill_not_yet_seen(e) or time.monotonic() >= deadline:
                    raise
            time.sleep(KILL_RETRY_S)
        while time.monotonic() < deadline:
            try:
                api.inspect_container(container_id)
            except docker.errors.NotFound:
                return
            time.sleep(0.05)
        raise SandboxError(f"container {container_id[:12]} is still being removed")

    async def start_attached(self, container_id: str) -> socket.socket:
        """Attach to the created container's stdin, stdout and stderr, then start it;
        return the attach's raw socket. Attached first, so no byte the command writes is
        missed, and both in one worker thread: a start is the hot path of a session."""
        return await self.run("start container", self._start_attached, container_id)

    def _start_attached(self, container_id: str) -> socket.socket:
        api = self.client.api
        streams = {"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1}
        sock = own_socket(api.attach_socket(container_id, params=streams))
        try:
            api.start(container_id)
        except BaseException:
            sock.close()
            raise
        return sock

    async def attach_exec(
        self, container_id: str, argv: builtins.list[str], user: str
    ) -> socket.socket:
        """Start `argv` as an attached exec (stdin open, no tty); return its raw socket.
        Not while the container is paused for a commit: an exec started into a paused
        container hangs in runc with the container's lock held, and the commit's unpause
        then waits for it for good (Docker 20.10; the container, `docker inspect` of it
        and image removals hang with it)."""
        while (paused := self._paused.get(container_id)) is not None:
            await paused.wait()
        return await self.run("start the sandbox guest", self._attach, container_id, argv, user)

    def _attach(self, container_id: str, argv: builtins.list[str], user: str) -> socket.socket:
        api = self.client.api
        exec_id = api.exec_create(container_id, argv, stdin=True, tty=False, user=user)["Id"]
        return own_socket(api.exec_start(exec_id, socket=True, tty=False))

    # -- images made from containers (setup snapshots, forks: `snapshots.py`)

    async def commit(
        self, container_id: str, repository: str, tag: str, labels: dict[str, str]
    ) -> str:
        """Save the container's filesystem as image `repository:tag`; return its id.
        The container is paused meanwhile (a consistent copy) and goes on afterwards.
        `labels` are merged over the ones the container carries."""
        while (paused := self._paused.get(container_id)) is not None:  # one at a time
            await paused.wait()
        done = self._paused[container_id] = asyncio.Event()
        try:
            return await self._commit(container_id, repository, tag, labels)
        finally:
            del self._paused[container_id]
            done.set()

    async def _commit(
        self, container_id: str, repository: str, tag: str, labels: dict[str, str]
    ) -> str:
        fn = functools.partial(
            self.client.api.commit,
            container_id,
            repository=repository,
            tag=tag,
            conf={"Labels": labels},
            pause=True,
        )
        return (await self.run("commit container", fn))["Id"]

    async def images(
        self, labels: builtins.list[str] | None = None
    ) -> builtins.list[dict[str, Any]]:
        """Images carrying every label in `labels` (all images, intermediate ones too,
        when None)."""
        api = self.client.api
        if labels is None:
            fn = functools.partial(api.images, all=True)
        else:
            fn = functools.partial(api.images, filters={"label": labels})
        return await self.run("list images", fn)

    async def tag_image(self, image: str, repository: str, tag: str) -> None:
        await self.run(f"tag image {image}", self.client.api.tag, image, repository, tag)

    async def remove_image(self, image: str) -> bool:
        """Remove an image or one of its tags (never forced). False when a container
        still uses it (the engine answers 409); True when removed or already gone."""

        def remove() -> bool:
            try:
                self.client.api.remove_image(image, noprune=False)
            except docker.errors.ImageNotFound:
                return True
            except docker.errors.APIError as e:
                if e.status_code == 409:
                    return False
                raise
            return True

        return await self.run(f"remove image {image}", remove)

    @contextlib.contextmanager
    def patient_client(self, timeout_s: float) -> Iterator[docker.DockerClient]:
        """A client to this engine for one long call (a pull), whose reads may wait
        `timeout_s`: a connection of its own when this engine made its client, else the
        client it was given."""
        if not self._owns_client:
            yield self.client
            return
        client = connect(self.address, timeout_s=timeout_s)
        try:
            yield client
        finally:
            client.close()

    def close(self) -> None:
        if self._owns_client and self._client is not None:
            self._client.close()


def ping_headers(client: docker.DockerClient) -> Mapping[str, str]:
    """The headers of the engine's `/_ping` answer: its API version, and what it is. A
    few milliseconds, where Podman takes ~1.5 s to answer `/version`."""
    api = request_helpers(client.api)
    return api._get(api._url("/_ping", versioned_api=False)).headers


def answering_product(client: docker.DockerClient) -> str:
    """What answers (`engine_product`), from its `/_ping` answer."""
    headers = ping_headers(client)
    if headers.get("Libpod-Api-Version"):
        return f"Podman {headers['Libpod-Api-Version']}"
    server = re.match(r"Docker/(\S+)", headers.get("Server", ""))
    return f"Docker {server.group(1)}" if server else engine_product(client.version())


def engine_product(version: dict[str, Any]) -> str:
    """What answers at an engine address, and its version: `Docker 28.2.2`, or
    `Podman 4.3.1` (its Docker-compatible API names itself among the components)."""
    for component in version.get("Components") or []:
        if "podman" in str(component.get("Name", "")).lower():
            return f"Podman {component.get('Version')}"
    return f"Docker {version.get('Version')}"


def connect(address: str | None = None, timeout_s: float = DOCKER_TIMEOUT_S) -> docker.DockerClient:
    """The one place a docker client is made: `address` or, when None, the environment's
    (DOCKER_HOST, DOCKER_TLS_VERIFY, DOCKER_CERT_PATH). It speaks the API version the
    engine's `/_ping` names: the SDK's own negotiation asks `/version`, which Podman
    takes ~1.5 s to answer, for every client made."""
    with translated(f"connect to the docker engine at {address or 'DOCKER_HOST'}"):
        probe = _client(address, timeout_s, MINIMUM_DOCKER_API_VERSION)
        try:
            api_version = ping_headers(probe).get("Api-Version")
        finally:
            probe.close()
        return _client(address, timeout_s, api_version or "auto")


def _client(address: str | None, timeout_s: float, version: str) -> docker.DockerClient:
    if address is None:
        return docker.from_env(timeout=int(timeout_s), max_pool_size=POOL_SIZE, version=version)
    return docker.DockerClient(
        base_url=address, timeout=int(timeout_s), max_pool_size=POOL_SIZE, version=version
    )


def own_socket(raw: Any) -> socket.socket:
    """The socket under a hijacked docker response, as a descriptor of our own, so
    closing the SDK's response objects (done here) cannot close ours."""
    sock = getattr(raw, "_sock", raw)
    if not isinstance(sock, socket.socket):
        raise SandboxError(f"unsupported docker transport for attach: {type(raw).__name__}")
    mine = sock.dup()
    with contextlib.suppress(Exception):
        raw.close()
        sock.close()
    return mine
