"""One settings model for the server. Every field can be set from the environment as
`ORSBOX_<FIELD>` (e.g. `ORSBOX_SESSION_TIMEOUT_S=60`) and the CLI exposes the common ones."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AliasChoices,
    Field,
    SecretStr,
    SerializeAsAny,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from orsbox.sandbox.backend_config import BackendConfig
from orsbox.sandbox.config import default_config, load_config_file, parse_config
from orsbox.sandbox.image_map import ImageMap


def _renamed(name: str, old: str) -> AliasChoices:
    """A renamed field, still set by its old name: as a keyword or as `ORSBOX_<OLD>`
    (an alias bypasses `env_prefix`, so the prefixed names are spelt out)."""
    return AliasChoices(*(n for field in (name, old) for n in (field, f"ORSBOX_{field.upper()}")))


class Settings(BaseSettings):
    # hide_input_in_errors: a malformed ORSBOX_SANDBOX_TOKENS must not print the tokens
    model_config = SettingsConfigDict(
        env_prefix="ORSBOX_", extra="ignore", hide_input_in_errors=True
    )

    host: str = Field(default="127.0.0.1", description="address to bind")
    port: int = Field(default=8080, ge=0, le=65535)
    session_timeout_s: float = Field(default=900.0, gt=0, description="inactivity timeout")
    session_lease_s: float = Field(
        default=60.0,
        ge=0,
        description="a session whose client has pinged is reaped this long after its last "
        "ping (the reference clients ping every 10 s while they hold a session, so a "
        "trainer that exited without deleting it stops); 0: off",
    )
    reap_interval_s: float = Field(
        default=5.0, gt=0, description="how often to look for idle sessions"
    )
    setup_wait_s: float = Field(
        default=25.0, ge=0, description="how long a request waits for setup"
    )
    setup_timeout_s: float = Field(default=900.0, gt=0, description="setup runs at most this long")
    teardown_timeout_s: float = Field(default=60.0, gt=0)
    setup_retry_after_s: int = Field(default=2, ge=0)
    keepalive_s: float = Field(default=10.0, gt=0, description="SSE keep-alive comment interval")
    result_linger_s: float = Field(
        default=60.0, ge=0, description="finished results kept for reconnect"
    )
    max_body_bytes: int = Field(default=16 * 1024 * 1024, gt=0, description="largest request body")
    max_header_bytes: int = Field(
        default=64 * 1024, gt=0, description="largest request line plus headers; past it 431"
    )
    request_read_timeout_s: float = Field(
        default=30.0, gt=0, description="a request must arrive whole within this; else 408"
    )
    max_deleted_remembered: int = Field(
        default=100_000, gt=0, description="deleted ids answering 410"
    )
    log_level: str = Field(default="info")
    server_id: str | None = Field(
        default=None, description="labels this server's sandboxes; default: host-pid-random"
    )

    # -- access and capacity -----------------------------------------------------------
    token: SecretStr | None = Field(
        default=None,
        description="API token; when set, every endpoint but /health needs it "
        "(Authorization: Bearer <token>, or X-API-Key as the ors-sdk client sends)",
    )
    default_environment: str | None = Field(
        default=None,
        description="the environment of requests that name none (by path, env_name or "
        "X-Deployment); unset: the only one served, and on a server of several such a "
        "request is a 400 listing them",
    )
    max_sessions: int = Field(default=1000, gt=0, description="live sessions; past it 503")
    max_starting: int = Field(
        default=64, gt=0, description="sessions in setup at once; past it 503"
    )
    capacity_retry_after_s: int = Field(default=5, ge=0)

    # -- what environments may ask of the sandbox (operator policy) ----------------------
    allow_network: bool = Field(
        default=False,
        description="let environments reach the internet (not the host or its private "
        "networks: the egress guard, docs/network.md)",
    )
    allow_network_allowlist: bool = Field(
        default=False,
        description="let environments reach the hosts of an allow-list through an egress "
        "proxy (implied by allow_network)",
    )
    allow_host_network: bool = Field(
        default=False, description="let environments share the host's network stack"
    )
    allow_privileged: bool = Field(default=False, description="let environments run privileged")
    allow_docker_socket: bool = Field(
        default=False, description="let environments mount the Docker socket (or any socket)"
    )
    allow_host_mounts: bool = Field(
        default=False,
        description="let environments mount host paths writable, or system folders; "
        "read-only data mounts need no permission",
    )
    allow_cap_add: list[str] = Field(
        default_factory=list, description="capabilities environments may add back"
    )

    # -- sandbox starts and the warm pool (see orsbox.sandbox.pool) ---------------------
    sandbox_start_concurrency: int | None = Field(
        default=None,
        gt=0,
        description="sandboxes starting at once, later starts queue; unset: measured "
        "while starts queue, raised while it makes them complete faster",
    )
    warm_pool: int = Field(
        default=0, ge=0, description="started idle sandboxes kept ready per sandbox spec"
    )
    warm_pool_idle_ttl_s: float = Field(
        default=600.0, gt=0, description="a spec not asked for this long has its pool emptied"
    )

    # -- SWE-bench-family grading (orsbox.formats.swebench.strict) ---------------------
    grading: Literal["official", "strict"] = Field(
        default="official",
        description="which verdict of a SWE-bench-family task is the reward: official (the "
        "harness's) or strict (the patch without its changes to tests, conftest.py, test "
        "configuration and start-up hooks); metadata carries both",
    )

    # -- the sandbox API for openreward environments (orsbox.server.sandbox_api) ---------
    sandbox_api: bool = Field(
        default=False, description="serve the openreward sandbox API (/create_sandbox, /run ...)"
    )
    sandbox_tokens: Annotated[list[SecretStr], NoDecode] = Field(
        default_factory=list,
        description="client tokens, one per client, accepted like ORSBOX_TOKEN (a JSON list "
        "or separated by commas); the sandbox API needs at least one token (these or "
        "ORSBOX_TOKEN)",
    )
    sandbox_images: Annotated[list[str], NoDecode] = Field(
        default_factory=lambda: ["orsbox/*"],
        description="image patterns (fnmatch) a client may ask for, a JSON list or "
        "separated by commas; default: orsbox's own",
    )
    image_map: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="image rewrite rules FROM=TO for the sandbox API (ORSBOX_IMAGE_MAP: "
        "separated by commas, semicolons or spaces); `orsbox serve --image-map` adds its own "
        "first; `sandbox_images` judges the mapped name",
    )
    sandbox_max_per_client: int = Field(
        default=16, gt=0, description="live sandboxes one client (token) may hold"
    )
    sandbox_timeout_s: float = Field(
        default=900.0, gt=0, description="a sandbox no request named for this long is removed"
    )
    sandbox_max_run_timeout_s: float = Field(
        default=3600.0, gt=0, description="longest /run; a request for none or more gets this"
    )
    sandbox_max_output_bytes: int = Field(
        default=16 * 1024 * 1024, gt=0, description="most output one /run returns"
    )

    # -- setup snapshots, forks, warm pool on request (orsbox.sandbox.setup_snapshots) ----
    setup_snapshots_max_entries: int = Field(
        default=64,
        ge=0,
        validation_alias=_renamed("setup_snapshots_max_entries", "prepared_cache_max_entries"),
        description="setup snapshots (one per task) kept; least recently used out",
    )
    setup_snapshots_max_bytes: int = Field(
        default=20 * 1024**3,
        ge=0,
        validation_alias=_renamed("setup_snapshots_max_bytes", "prepared_cache_max_bytes"),
        description="bytes the setup snapshots may add to their images",
    )
    max_fork: int = Field(default=64, gt=0, description="most sessions one fork request starts")
    warm_pool_memory_bytes: int = Field(
        default=8 * 1024**3,
        ge=0,
        description="idle pooled sandboxes' memory limits together stay within this",
    )
    # -- pulled images (orsbox.sandbox.image_cache) ------------------------------------------
    image_disk_budget: int | None = Field(
        default=None,
        description="disk the images this server pulled may take (e.g. 40G, 850M); past "
        "it the least recently used one not in use is removed; default: unbounded",
    )
    # -- the operator's view (orsbox.monitoring) --------------------------------------------
    metrics_public: bool = Field(
        default=False, description="serve /metrics without the token (for a scraper)"
    )
    record_episodes: bool = Field(
        default=True, description="record every episode in an SQLite database"
    )
    episodes_db: str | None = Field(
        default=None,
        description="where episodes are recorded; default: "
        "$XDG_DATA_HOME/orsbox/episodes.sqlite3 (~/.local/share/...)",
    )
    episodes_retention_days: float = Field(
        default=30.0, ge=0, description="ended episodes older than this are removed; 0: kept"
    )
    episodes_output_cap_chars: int = Field(
        default=16 * 1024, gt=64, description="longest text of a call's input or output kept"
    )
    log_format: str = Field(
        default="human", pattern="^(human|json)$", description="human, or json: one object a line"
    )

    # -- a grader that could not run (orsbox.errors.GradingError, docs/grading-errors.md) --
    grading_errors: Literal["error", "as-zero"] = Field(
        default="error",
        description="a grader that could not run: error (submit fails naming the cause), "
        "or as-zero (reward 0.0, Harbor's numbers); the episode record keeps the cause",
    )

    # -- one cell of a cluster behind a router (orsbox.server.cells, docs/cluster.md) -----
    cell: str = Field(
        default_factory=lambda: _default_cell(),
        description="this server's cell id, carried in the session ids it creates so a "
        "router can send each request to its cell; a DNS label; default: the host name",
    )
    create_reservation_s: float = Field(
        default=30.0,
        gt=0,
        description="a session id from /create_session holds a place for this long "
        "before /create, so a cell never hands out more ids than it has room for",
    )

    @field_validator("cell")
    @classmethod
    def _cell_is_a_dns_label(cls, value: str) -> str:
        from orsbox.server.cells import check_cell

        return check_cell(value)

    # -- the sandbox backend (orsbox.sandbox.config) -------------------------------------
    backend: SerializeAsAny[BackendConfig] = Field(
        default_factory=default_config,
        description='where sandboxes run, as JSON: {"type": "docker", "engine": '
        '"unix:///var/run/docker.sock", "runtime": "runsc"}; see orsbox.sandbox.config',
    )
    backend_file: Path | None = Field(
        default=None, description="a TOML or JSON file with the backend config (wins over BACKEND)"
    )

    @field_validator("image_disk_budget", mode="before")
    @classmethod
    def _a_size(cls, value: Any) -> Any:
        """Bytes, or a size as docker writes one: "40G", "850m", "1.5GiB"."""
        from orsbox.sandbox.sizes import parse_size

        if value is None or value == "":
            return None
        return parse_size(value if isinstance(value, int) else str(value))

    @field_validator("sandbox_images", "sandbox_tokens", mode="before")
    @classmethod
    def _a_list(cls, value: Any, info: ValidationInfo) -> Any:
        """A JSON list, or items separated by commas (`a,b`, as a shell writes them)."""
        return text_list(value, f"ORSBOX_{str(info.field_name).upper()}")

    @field_validator("image_map", mode="before")
    @classmethod
    def _image_rules(cls, value: Any) -> Any:
        rules = ImageMap.split(value) if isinstance(value, str) else value
        ImageMap.parse(rules)  # a malformed rule fails here, at startup
        return rules

    @field_validator("backend", mode="before")
    @classmethod
    def _backend_type(cls, value: Any) -> BackendConfig:
        """One of the backends' configs (`orsbox.sandbox.config.BACKENDS`), by its type."""
        return parse_config(value)

    @model_validator(mode="after")
    def _backend_from_file(self) -> Settings:
        if self.backend_file is not None:
            self.backend = load_config_file(self.backend_file)
        return self


def text_list(value: Any, variable: str) -> Any:
    """`value` as a list when it is text: a JSON list (`["a", "b"]`), or items separated
    by commas (`a, b`); a malformed JSON list is an error naming `variable`."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    if text.startswith("["):
        try:
            parsed = json.loads(text)
        except json.JSONDecodeError as e:
            raise ValueError(
                f"{variable}: not a JSON list ({e.msg}); give a JSON list such as "
                f'["a", "b"], or items separated by commas: a,b'
            ) from None
        if not isinstance(parsed, list) or not all(isinstance(i, str) for i in parsed):
            raise ValueError(f"{variable}: a JSON list of strings, or items separated by commas")
        return parsed
    return [item.strip() for item in text.split(",") if item.strip()]


def _default_cell() -> str:
    from orsbox.server.cells import default_cell

    return default_cell()
