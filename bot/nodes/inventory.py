"""The node inventory (NCCLBOT_NODES_FILE)::

    nodes:
      gpu-node-17: {url: "https://10.0.0.17:8470", labels: [rack-3]}
    groups:
      rack-3: [gpu-node-17, gpu-node-18]

Names resolve to nodes; a group name (or a label) expands to its members.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from urllib.parse import urlsplit

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from bot.errors import ConfigError, NodeError


class Node(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = ""
    url: str
    labels: list[str] = Field(default_factory=list)

    @field_validator("url")
    @classmethod
    def _url(cls, v: str) -> str:
        parts = urlsplit(v)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"url must be http(s)://HOST:PORT, got {v!r}")
        return v.rstrip("/")

    @property
    def host(self) -> str:
        return urlsplit(self.url).hostname or ""


class Inventory(BaseModel):
    model_config = ConfigDict(extra="forbid")

    nodes: dict[str, Node] = Field(default_factory=dict)
    groups: dict[str, list[str]] = Field(default_factory=dict)

    def model_post_init(self, _: object) -> None:
        for name, node in self.nodes.items():
            node.name = name

    def get(self, name: str) -> Node:
        """The node called `name`; NodeError with close matches otherwise."""
        if name in self.nodes:
            return self.nodes[name]
        close = difflib.get_close_matches(name, list(self.nodes) + list(self.groups), n=3,
                                          cutoff=0.5)
        hint = (f"Did you mean {', '.join(close)}?" if close else
                f"Known nodes: {', '.join(sorted(self.nodes)[:10]) or 'none'}.")
        raise NodeError(f"unknown node {name!r}", hint=hint + " The inventory is "
                        "NCCLBOT_NODES_FILE (see docs/agent.md).")

    def expand(self, names: list[str]) -> list[Node]:
        """Names, group names or labels -> distinct nodes, in order."""
        out: dict[str, Node] = {}
        for name in names:
            if name in self.groups:
                members = self.groups[name]
            elif name not in self.nodes and (
                    tagged := [n for n, node in self.nodes.items() if name in node.labels]):
                members = tagged
            else:
                members = [name]
            for m in members:
                out.setdefault(m, self.get(m))
        return list(out.values())


def parse_inventory(text: str, source: str = "inventory") -> Inventory:
    try:
        raw = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source} is not valid YAML: {exc}") from exc
    if not isinstance(raw, dict):
        raise ConfigError(f"{source} must be a mapping with a `nodes:` key")
    try:
        inv = Inventory.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise ConfigError(f"{source}: {problems}") from exc
    for group, members in inv.groups.items():
        missing = [m for m in members if m not in inv.nodes]
        if missing:
            raise ConfigError(f"{source}: group {group!r} names unknown nodes {missing}")
    return inv


def load_inventory(path: Path | None) -> Inventory:
    if path is None:
        raise NodeError("no node inventory configured",
                        hint="Set NCCLBOT_NODES_FILE to a YAML file with `nodes: {NAME: {url: "
                        "...}}` (see docs/agent.md).")
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read node inventory {path}: {exc.strerror}",
                          hint="Check NCCLBOT_NODES_FILE.") from exc
    return parse_inventory(text, str(path))
