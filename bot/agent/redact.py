"""What the model may see: secrets removed, hosts/IPs/users swapped for stable placeholders.

Secrets use `tools.redact.redact_text` (the node-side redaction) plus a pass over
`NAME=value` assignments whose name looks secret. With `hosts=True` host names,
IPv4/IPv6 addresses and user names become `HOST_n`, `IP_n`, `USER_n`; the mapping is
kept (and serialisable) so answers can be mapped back with `restore`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from tools.redact import REDACTED, is_secret_name, redact_text

PLACEHOLDER = re.compile(r"\b(?:HOST|IP|USER)_\d+\b")
_ASSIGN = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*)=(\"[^\"]*\"|'[^']*'|[^\s,;&]+)")
_IPV4 = re.compile(r"(?<![\d.])(?:(?:25[0-5]|2[0-4]\d|1?\d?\d)\.){3}(?:25[0-5]|2[0-4]\d|1?\d?\d)"
                   r"(?![\d.]*\d)")
_IPV6 = re.compile(r"(?<![\w:])(?:[0-9a-fA-F]{1,4}:){7}[0-9a-fA-F]{1,4}(?![\w:])"
                   r"|(?<![\w:])(?:[0-9a-fA-F]{1,4}:){1,6}:(?:[0-9a-fA-F]{1,4})?(?![\w:])"
                   r"|(?<![\w:])::(?:[0-9a-fA-F]{1,4}:){0,6}[0-9a-fA-F]{1,4}(?![\w:])")
_TLDS = ("local", "internal", "lan", "corp", "cluster", "svc", "com", "net", "org", "io", "ai",
         "cn", "dev", "cloud", "example", "intra", "priv", "edu", "gov")
_FQDN = re.compile(r"\b[a-zA-Z0-9][a-zA-Z0-9-]*(?:\.[a-zA-Z0-9-]+)*\.(?:" + "|".join(_TLDS)
                   + r")\b(?![.\w-]*\()")
#: "host:pid:tid [dev] NCCL ..." - NCCL's own line prefix names the host.
_NCCL_PREFIX = re.compile(r"(?m)(?:^|(?<=[\s\]]))([A-Za-z][\w.-]*):\d+:\d+ \[\d+\]")
_HOST_KEYS = re.compile(
    r"(?i)\b(?:host(?:name)?|node(?:name)?|master_addr|master-addr|MASTER_ADDR|addr)\b"
    r"\s*[:=]\s*['\"]?([A-Za-z][\w.-]*[\w])"
)
_USER_CTX = re.compile(
    r"(?:/home/|/Users/|/data/users/)([A-Za-z_][\w.-]{0,31})"
    r"|\b(?:user(?:name)?|USER|LOGNAME)\s*[:=]\s*['\"]?([A-Za-z_][\w.-]{0,31})"
    r"|://([A-Za-z_][\w.-]{0,31}):"
)
_USER_AT_HOST = re.compile(r"(?<![\w.-])([A-Za-z_][\w.-]{0,31})@([A-Za-z][\w.-]*[A-Za-z0-9])")
#: Cluster-style node names in free text: gpu-node-7, worker-3, dgx-a100-01, node12-ib.
_NODE_NAME = re.compile(r"(?<![\w.-])(?:[a-zA-Z][a-zA-Z0-9]*-)*(?:node|gpu|host|worker|compute|dgx"
                        r"|hgx|server)[a-zA-Z0-9]*-[\w-]*\d[\w-]*(?![\w.-])"
                        r"|(?<![\w.-])(?:node|worker|compute|host)\d+(?:-[\w-]+)?(?![\w.-])")
_HOST_KEY_NAMES = frozenset({"host", "hostname", "node", "nodename", "master_addr", "addr",
                             "fqdn", "server"})
_USER_KEY_NAMES = frozenset({"user", "username", "login", "owner"})
_NOT_HOSTS = frozenset({"localhost", "none", "null", "true", "false", "unknown", "0", "auto"})
_NOT_USERS = frozenset({"root"}) | _NOT_HOSTS


def _kind_values(text: str) -> Iterable[tuple[str, str]]:
    for m in _IPV4.finditer(text):
        yield "IP", m.group(0)
    for m in _IPV6.finditer(text):
        yield "IP", m.group(0)
    for m in _NODE_NAME.finditer(text):
        yield "HOST", m.group(0)
    for rx in (_NCCL_PREFIX, _HOST_KEYS):
        for m in rx.finditer(text):
            yield "HOST", m.group(1)
    for m in _FQDN.finditer(text):
        yield "HOST", m.group(0)
    for m in _USER_CTX.finditer(text):
        user = next(g for g in m.groups() if g)
        yield "USER", user
    for m in _USER_AT_HOST.finditer(text):
        yield "USER", m.group(1)
        yield "HOST", m.group(2)


class Redactor:
    """Redacts text for the model; with `hosts`, keeps a placeholder mapping to restore."""

    def __init__(self, hosts: bool = False, mapping: dict[str, str] | None = None) -> None:
        self.hosts = hosts
        self.mapping: dict[str, str] = dict(mapping or {})  # placeholder -> original
        self._reverse = {v: k for k, v in self.mapping.items()}

    # -- placeholders --------------------------------------------------------------------
    def placeholder(self, kind: str, value: str) -> str:
        if value in self._reverse:
            return self._reverse[value]
        n = sum(1 for k in self.mapping if k.startswith(kind + "_")) + 1
        ph = f"{kind}_{n}"
        self.mapping[ph] = value
        self._reverse[value] = ph
        return ph

    def learn(self, kind: str, values: Iterable[str]) -> None:
        """Register known names (hosts from a log report, node names) for replacement."""
        if self.hosts:
            for v in values:
                if v and v.lower() not in _NOT_HOSTS and not PLACEHOLDER.fullmatch(v):
                    self.placeholder(kind, v)

    def _replace_known(self, text: str) -> str:
        if not self._reverse:
            return text
        names = sorted(self._reverse, key=len, reverse=True)
        rx = re.compile(r"(?<![\w.-])(?:" + "|".join(map(re.escape, names)) + r")(?![\w-]|\.\w)")
        return rx.sub(lambda m: self._reverse[m.group(0)], text)

    # -- text ----------------------------------------------------------------------------
    def redact(self, text: str) -> str:
        """Secrets always; hosts, IPs and users too when enabled. Idempotent."""
        text = redact_text(text)
        text = _ASSIGN.sub(lambda m: f"{m.group(1)}={REDACTED}"
                           if is_secret_name(m.group(1)) and m.group(2) != REDACTED
                           else m.group(0), text)
        if not self.hosts:
            return text
        for kind, value in _kind_values(text):
            low = value.lower()
            if PLACEHOLDER.fullmatch(value) or value == REDACTED:
                continue
            if (kind == "USER" and low in _NOT_USERS) or low in _NOT_HOSTS:
                continue
            self.placeholder(kind, value)
        return self._replace_known(text)

    def restore(self, text: str) -> str:
        """Map placeholders back to the original names (secrets stay redacted)."""
        if not self.mapping:
            return text
        return PLACEHOLDER.sub(lambda m: self.mapping.get(m.group(0), m.group(0)), text)

    # -- structures ----------------------------------------------------------------------
    def redact_obj(self, obj: Any, key: str | None = None) -> Any:
        """Redact every string in a JSON-like structure; values under secret keys vanish."""
        if isinstance(obj, str):
            if key is not None and is_secret_name(key) and obj:
                return REDACTED
            low = (key or "").lower()
            if self.hosts and re.fullmatch(r"[\w.:-]{1,253}", obj) and obj.lower() not in \
                    _NOT_HOSTS and (low in _HOST_KEY_NAMES or low in _USER_KEY_NAMES):
                kind = "HOST" if low in _HOST_KEY_NAMES else "USER"
                if not PLACEHOLDER.fullmatch(obj) and not _IPV4.fullmatch(obj):
                    return self.placeholder(kind, obj)
            return self.redact(obj)
        if isinstance(obj, dict):
            return {k: self.redact_obj(v, str(k)) for k, v in obj.items()}
        if isinstance(obj, (list, tuple)):
            return [self.redact_obj(v) for v in obj]
        return obj

    def restore_obj(self, obj: Any) -> Any:
        if isinstance(obj, str):
            return self.restore(obj)
        if isinstance(obj, dict):
            return {k: self.restore_obj(v) for k, v in obj.items()}
        if isinstance(obj, (list, tuple)):
            return [self.restore_obj(v) for v in obj]
        return obj

    def redact_payload(self, text: str) -> str:
        """Like `redact`, but a JSON document is redacted value by value and stays JSON."""
        stripped = text.lstrip()
        if stripped[:1] in "{[":
            try:
                data = json.loads(text)
            except ValueError:
                return self.redact(text)
            return json.dumps(self.redact_obj(data), ensure_ascii=False)
        return self.redact(text)
