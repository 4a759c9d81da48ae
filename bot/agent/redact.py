"""What the model may see: secrets removed, hosts/IPs/users swapped for stable placeholders.

Secrets are always removed (`redact_rules.strip_secrets`; in structures, every value
under a secret-looking key, numbers and lists included, and the value after a secret
flag in an argv list). With `hosts=True` host names, IPv4/IPv6 addresses and user
names become `HOST_n`, `IP_n`, `USER_n`; the mapping is kept (and serialisable) so
answers can be mapped back with `restore`.

Names are learned before they are replaced: `learn_payload` reads a whole request (the
question, attachment names, every tool output) so that a name recognised in one message
is hidden in all of them, and `learn` takes names known from elsewhere (the hosts
analyze_log found, the node inventory).
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Iterable
from typing import Any, TypeVar

from pydantic import BaseModel

from bot.agent.redact_rules import (
    NOT_HOSTS,
    NOT_USERS,
    PLACEHOLDER,
    expand_nodelist,
    find_names,
    find_structural_names,
    is_secret_flag,
    secret_key,
    strip_secrets,
)
from tools.redact import REDACTED, as_json, redact_json

M = TypeVar("M", bound=BaseModel)

_HOST_KEYS = frozenset({"host", "hostname", "hosts", "node", "nodename", "nodes", "master_addr",
                        "addr", "fqdn", "server", "nodelist", "peer"})
_USER_KEYS = frozenset({"user", "username", "login", "owner", "logname"})
_NAME_VALUE = re.compile(r"[\w.\[\],-]{1,253}")
#: A learned name is replaced where it stands alone, or as a log file's stem.
_AFTER = r"(?![\w-]|\.(?!(?:log|txt|gz|zip|out|err|json)\b)\w)"


def _key_kind(key: str | None) -> str | None:
    low = (key or "").lower()
    if low in _HOST_KEYS or low.endswith(("_host", "_hostname", "_nodename", "_nodelist")):
        return "HOST"
    if low in _USER_KEYS or low.endswith("_user"):
        return "USER"
    return None


class Redactor:
    """Redacts text for the model; with `hosts`, keeps a placeholder mapping to restore."""

    def __init__(self, hosts: bool = False, mapping: dict[str, str] | None = None) -> None:
        self.hosts = hosts
        self.mapping: dict[str, str] = dict(mapping or {})  # placeholder -> original
        self._reverse = {v: k for k, v in self.mapping.items()}
        self._known_rx: re.Pattern[str] | None = None

    # -- learning names ------------------------------------------------------------------
    def placeholder(self, kind: str, value: str) -> str:
        if value in self._reverse:
            return self._reverse[value]
        n = sum(1 for k in self.mapping if k.startswith(kind + "_")) + 1
        ph = f"{kind}_{n}"
        self.mapping[ph] = value
        self._reverse[value] = ph
        self._known_rx = None
        return ph

    def _add(self, kind: str, value: str) -> None:
        value = value.strip().strip("'\"")
        if not value or value == REDACTED or PLACEHOLDER.fullmatch(value):
            return
        if value.lower() in (NOT_USERS if kind == "USER" else NOT_HOSTS):
            return
        if kind == "HOST" and _is_ip(value):
            kind = "IP"
        names = expand_nodelist(value) if kind == "HOST" else [value]
        for name in dict.fromkeys([value, *names]):
            self.placeholder(kind, name)

    def learn(self, kind: str, values: Iterable[str]) -> None:
        """Register known names (hosts from a log report, node names) for replacement."""
        if self.hosts:
            for v in values:
                self._add(kind, str(v))

    def learn_text(self, text: str) -> None:
        """Register every host, IP and user recognised in `text`."""
        if self.hosts:
            self._learn_names(strip_secrets(text))

    def _learn_names(self, stripped: str) -> None:
        """`learn_text` for text whose secrets are already stripped."""
        for kind, value in find_names(stripped):
            self._add(kind, value)

    def learn_structure(self, text: str) -> None:
        """Register the names only `text`'s structure reveals (a log's NCCL prefixes, host
        keys, home directories): cheaper than `learn_text`, for reading whole logs."""
        if self.hosts:
            for kind, value in find_structural_names(text):
                self._add(kind, value)

    def learn_obj(self, obj: Any, key: str | None = None) -> None:
        """Like `learn_text` over a JSON-like structure; values under host/user keys too."""
        if not self.hosts or (key is not None and secret_key(key)):
            return
        if isinstance(obj, str):
            kind = _key_kind(key)
            if kind and _NAME_VALUE.fullmatch(obj):
                self._add(kind, obj)
            self.learn_text(obj)
        elif isinstance(obj, dict):
            for k, v in obj.items():
                self.learn_text(str(k))
                self.learn_obj(v, str(k))
        elif isinstance(obj, (list, tuple)):
            for v in obj:
                self.learn_obj(v, key)

    def learn_payload(self, text: str) -> None:
        """Learn from one message: a JSON document value by value, anything else as text."""
        data = as_json(text)
        if data is not None:
            self.learn_obj(data)
        else:
            self.learn_text(text)

    def _replace_known(self, text: str) -> str:
        if not self._reverse:
            return text
        if self._known_rx is None:
            names = sorted(self._reverse, key=len, reverse=True)
            self._known_rx = re.compile(r"(?<![\w.-])(?:" + "|".join(map(re.escape, names))
                                        + r")" + _AFTER)
        return self._known_rx.sub(lambda m: self._reverse[m.group(0)], text)

    # -- redacting -------------------------------------------------------------------------
    def redact(self, text: str) -> str:
        """Secrets always; hosts, IPs and users too when enabled. Idempotent."""
        text = strip_secrets(text)
        if not self.hosts:
            return text
        self._learn_names(text)
        return self._replace_known(text)

    def redact_obj(self, obj: Any, key: str | None = None) -> Any:
        """Redact every string (and dict key) in a JSON-like structure; values under secret
        keys vanish whatever their type, and so does the value after a secret argv flag."""
        if key is not None and secret_key(key):
            return redact_json(obj, key)
        if isinstance(obj, str):
            kind = _key_kind(key) if self.hosts else None
            if kind and _NAME_VALUE.fullmatch(obj):
                self._add(kind, obj)
            return self.redact(obj)
        if isinstance(obj, dict):
            return {self.redact(k) if isinstance(k, str) else k: self.redact_obj(v, str(k))
                    for k, v in obj.items()}
        if isinstance(obj, (list, tuple)):
            out = []
            for i, v in enumerate(obj):
                after_flag = i > 0 and isinstance(obj[i - 1], str) and is_secret_flag(obj[i - 1])
                out.append(REDACTED if after_flag and isinstance(v, (str, int, float))
                           else self.redact_obj(v, key))
            return out
        return obj

    def redact_payload(self, text: str) -> str:
        """Like `redact`, but a JSON document is redacted value by value and stays JSON."""
        data = as_json(text)
        if data is None:
            return self.redact(text)
        return json.dumps(self.redact_obj(data), ensure_ascii=False)

    # -- restoring -------------------------------------------------------------------------
    def restore(self, text: str) -> str:
        """Map placeholders back to the original names (secrets stay redacted)."""
        if not self.mapping:
            return text
        return PLACEHOLDER.sub(lambda m: self.mapping.get(m.group(0), m.group(0)), text)

    def restore_model(self, model: M) -> M:
        """A copy of `model` with the placeholders in its strings mapped back."""
        return type(model).model_validate(self.restore_obj(model.model_dump()))

    def restore_obj(self, obj: Any) -> Any:
        if isinstance(obj, str):
            return self.restore(obj)
        if isinstance(obj, dict):
            return {self.restore(k) if isinstance(k, str) else k: self.restore_obj(v)
                    for k, v in obj.items()}
        if isinstance(obj, (list, tuple)):
            return [self.restore_obj(v) for v in obj]
        return obj


def _is_ip(value: str) -> bool:
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return False
    return True
