"""The patterns behind `bot.agent.redact` (pure): secrets to strip, names to hide.

Secrets: `strip_secrets` is `tools.redact.redact_text`, the one rule set that the node,
Slack's door and the model's requests share (token shapes, secret names in every
notation, flags, connection strings, JSON as JSON).

Names (`find_names`): hosts, IPs and users, found from the text's own structure (NCCL's
`host:pid:tid [dev]` prefix, nccl-tests' `on HOST device`, MASTER_ADDR= and other host
keys and flags, `(host, port)` tuples, pdsh `host: ` prefixes, Slurm node lists,
home directories, USER= keys, user@host) and from common cluster name shapes
(`gpu-node-7`, `sjc-a100-017`, `a100-box3`, `dgx01`, `n017`, `ip-10-0-0-1`, FQDNs).
"""

from __future__ import annotations

import ipaddress
import re
from collections import Counter
from collections.abc import Iterator

from tools.redact import REDACTED as REDACTED
from tools.redact import is_secret_flag as is_secret_flag
from tools.redact import redact_text
from tools.redact import secret_key as secret_key

PLACEHOLDER = re.compile(r"\b(?:HOST|IP|USER)_\d+\b")


# -- secrets --------------------------------------------------------------------------------
def strip_secrets(text: str) -> str:
    """Remove every secret-shaped value from `text` (idempotent): `tools.redact.redact_text`,
    the one rule set of every door (the node, Slack, the model)."""
    return redact_text(text)


# -- names ----------------------------------------------------------------------------------
_IPV4 = re.compile(r"(?<![\d.])(?:(?:25[0-5]|2[0-4]\d|1?\d?\d)\.){3}(?:25[0-5]|2[0-4]\d|1?\d?\d)"
                   r"(?![\d.]*\d)")
_IPV6 = re.compile(r"(?<![\w.%])(?=[0-9A-Fa-f]|::)(?:[0-9A-Fa-f]{0,4}:){2,7}[0-9A-Fa-f]{0,4}"
                   r"(?:%[A-Za-z0-9_.-]+)?(?![\w:.])")
_TLDS = ("local", "internal", "lan", "corp", "cluster", "svc", "com", "net", "org", "io", "ai",
         "cn", "dev", "cloud", "example", "intra", "priv", "edu", "gov")
_FQDN = re.compile(r"\b[a-zA-Z0-9][a-zA-Z0-9-]*(?:\.[a-zA-Z0-9-]+)*\.(?:" + "|".join(_TLDS)
                   + r")\b(?![.\w-]*\()")
_HOSTNAME = r"[A-Za-z][\w.-]*[A-Za-z0-9]|[A-Za-z]"
#: NCCL's own line prefix `host:pid:tid [dev]`.
_NCCL_PREFIX = re.compile(r"(?m)(?:^|(?<=[\s\]]))(" + _HOSTNAME + r"):\d+:\d+ \[\d+\]")
#: nccl-tests: `#  Rank  0 Group  0 Pid  1234 on  HOST device  0 [0x07] ...`.
_ON_DEVICE = re.compile(r"\bPid\s+\d+\s+on\s+(" + _HOSTNAME + r")\s+device\s+\d")
_HOST_ASSIGN = re.compile(
    r"(?i)(?<![A-Za-z0-9])(?<!per_)(?:host(?:name)?|node(?:name)?|addr(?:ess)?|nodelist)\b"
    r"['\"]?(\s*[:=]\s*)['\"]?([A-Za-z][\w.-]*(?:\[[\d,-]+\][\w.-]*)?)")
_HOST_FLAG = re.compile(
    r"(?<![\w-])--(?:master[_-]addr(?:ess)?|master|host(?:name)?|node[_-]?name|nodelist"
    r"|rdzv[_-]endpoint)(=|\s+)([A-Za-z][\w.-]*(?:\[[\d,-]+\][\w.-]*)?)")
#: A value after `key:`, `key = ` or `--flag ` (not `key=`) must look like a name, not prose.
_NAMEISH = re.compile(r"[\d.-]")
_ENV_NAME = re.compile(r"[A-Z0-9]+(?:_[A-Z0-9]+)+")
_TUPLE = re.compile(r"(?i)\b(?:connect\w*|to|at|from|peer|store|server|endpoint|address)\s+"
                    r"\(\s*['\"]?([A-Za-z][\w.-]*)['\"]?\s*,\s*['\"]?\d{2,5}['\"]?\s*\)")
_PDSH = re.compile(r"(?m)^(" + _HOSTNAME + r"): ")
#: Lower-case words that start log lines as `word: ...` and are not hosts.
_LINE_WORDS = frozenset({"error", "warning", "note", "hint", "fatal", "info", "debug", "trace",
                         "usage", "status", "reason", "message", "details", "kernel", "systemd",
                         "sshd", "dockerd", "containerd", "kubelet", "slurmd", "slurmctld",
                         "slurmstepd", "srun", "sbatch", "bash", "sh", "python", "pip", "git",
                         "make", "cmake", "ninja", "nvcc", "gcc", "ld", "torchrun", "deepspeed"})
_NOT_PDSH = re.compile(r"(?i)^(?:rank|gpu|cuda|device|local_?rank|step|epoch|iter(?:ation)?|line"
                       r"|python|pip|gcc|nvcc|layer|stage|batch|job|warning|error)[\d._-]")
_GPUS = r"(?:a100|a800|h100|h200|h800|h20|b100|b200|gb200|l40s?|l20|a40|a30|a10g?|v100|mi\d{3}x?)"
_GPU_HOST = re.compile(r"(?<![\w.-])(?:[a-z][a-z0-9]*-){0,2}" + _GPUS + r"(?:-[a-z0-9]+){1,2}"
                       r"(?![\w-])")
_NOT_HOST_PART = re.compile(r"sxm\d*|pcie|\d+gb?|hbm\d*e?|nvl\d*|mig|\d+x")
#: `gpu-node-7`, `smc-gpu-03`, `dgx-a100-01`: a node word, then only numbered segments.
_NODE_NAME = re.compile(r"(?<![\w.-])(?:[a-zA-Z][a-zA-Z0-9]*-){0,3}(?:node|gpu|host|worker|compute"
                        r"|dgx|hgx|server|box|srv)[a-zA-Z0-9]*(?:-[a-zA-Z]{0,3}\d[a-zA-Z0-9]*)+"
                        r"(?![\w.-])"
                        r"|(?<![\w.-])(?:node|worker|compute|host)\d+(?:-[\w-]+)?(?![\w.-])"
                        r"|(?<![\w.-])(?:dgx|hgx|cn|gn|n)\d{2,4}(?:-[a-z0-9]+)*(?![\w.-])"
                        r"|(?<![\w.-])ip-\d{1,3}-\d{1,3}-\d{1,3}-\d{1,3}(?![\w-])")
_USER_CTX = re.compile(
    r"/(?:home|homes|Users|users|u)/([A-Za-z_][\w-]{0,31}(?:\.[\w-]+)*)"
    r"|(?i:(?<![A-Za-z0-9])(?:user(?:name)?|logname|login)\b)['\"]?\s*[:=]\s*['\"]?"
    r"([A-Za-z_][\w.-]{0,31})"
    r"|://([A-Za-z_][\w.-]{0,31}):"
    r"|(?<![\w-])--user(?:name)?(?:=|\s+)([A-Za-z_][\w.-]{0,31})")
_USER_AT_HOST = re.compile(r"(?<![\w.-])([A-Za-z_][\w.-]{0,31})@([A-Za-z][\w.-]*[A-Za-z0-9])")
NOT_HOSTS = frozenset({"localhost", "none", "null", "true", "false", "unknown", "0", "auto",
                       "ip6-localhost", "127.0.0.1", "::1", "0.0.0.0", "env", "default"})
NOT_USERS = frozenset({"root", "pdsh", "user", "ubuntu", "admin", "nobody", "test", "data",
                       "shared", "home", "users", "share", "local", "bin", "lib", "tmp",
                       *NOT_HOSTS})


def expand_nodelist(value: str, cap: int = 256) -> list[str]:
    """`node[01-03,07]` -> node01, node02, node03, node07 (Slurm's compact form)."""
    m = re.fullmatch(r"([\w.-]*)\[([\d,-]+)\]([\w.-]*)", value)
    if m is None:
        return [value]
    out = []
    for part in m.group(2).split(","):
        lo, _, hi = part.partition("-")
        if not lo.isdigit() or (hi and not hi.isdigit()):
            continue
        for n in range(int(lo), int(hi or lo) + 1):
            out.append(f"{m.group(1)}{n:0{len(lo)}d}{m.group(3)}")
            if len(out) >= cap:
                return out
    return out


def _ipv6(candidate: str) -> bool:
    address, _, zone = candidate.partition("%")
    try:
        ipaddress.IPv6Address(address)
    except ValueError:
        return False
    groups = [g for g in address.split(":") if g]
    return bool(zone) or len(groups) >= 3 or (len(groups) == 2 and len(groups[0]) >= 3)


def _gpu_host(name: str) -> bool:
    parts = [p for p in re.split(r"-", name) if not re.fullmatch(_GPUS, p)]
    return any(re.search(r"\d", p) for p in parts) and not any(
        _NOT_HOST_PART.fullmatch(p) for p in parts)


def _hostish(value: str) -> bool:
    return bool(re.search(r"[A-Za-z]", value)) and value.lower() not in NOT_HOSTS


def find_names(text: str) -> Iterator[tuple[str, str]]:
    """(kind, value) for every host (HOST), address (IP) and user (USER) found in `text`:
    by structure and context (`find_structural_names`) and by shape."""
    for m in _IPV4.finditer(text):
        yield "IP", m.group(0)
    for m in _IPV6.finditer(text):
        if _ipv6(m.group(0)):
            yield "IP", m.group(0)
    yield from find_structural_names(text)
    for m in _GPU_HOST.finditer(text):
        if _gpu_host(m.group(0)):
            yield "HOST", m.group(0)
    for rx in (_NODE_NAME, _FQDN):
        for m in rx.finditer(text):
            yield "HOST", m.group(0)


def shaped_names(text: str) -> Iterator[tuple[str, int, int]]:
    """(value, start, end) of every IPv4/IPv6 literal, cluster-shaped node name and FQDN in
    `text`, by shape alone (no context), longest first where they overlap; a host inside
    a URL (`https://docs.example.com/...`) is a reference, not a node, and is skipped."""
    spans: list[tuple[int, int]] = []
    for m in _IPV4.finditer(text):
        spans.append(m.span())
    for m in _IPV6.finditer(text):
        if _ipv6(m.group(0)):
            spans.append(m.span())
    for m in _GPU_HOST.finditer(text):
        if _gpu_host(m.group(0)):
            spans.append(m.span())
    for rx in (_NODE_NAME, _FQDN):
        spans += [m.span() for m in rx.finditer(text)]
    taken: list[tuple[int, int]] = []
    for start, end in sorted(spans, key=lambda se: (se[0], -(se[1] - se[0]))):
        if any(s <= start < e for s, e in taken) or text[max(0, start - 3):start] == "://":
            continue
        taken.append((start, end))
        yield text[start:end], start, end


def find_structural_names(text: str) -> Iterator[tuple[str, str]]:
    """Names that only the text's structure or context marks as names (`alpha7` in
    `alpha7:123:456 [0] NCCL`, `HOME=/home/erin`), whatever they look like."""
    for rx in (_NCCL_PREFIX, _ON_DEVICE):
        for m in rx.finditer(text):
            if _hostish(m.group(1)):
                yield "HOST", m.group(1)
    for rx in (_HOST_ASSIGN, _HOST_FLAG):
        for m in rx.finditer(text):
            name = m.group(2).rstrip(".-")
            if m.group(1) != "=" and not _NAMEISH.search(name):
                continue  # `Multi-node: put every host...`, `NODE = Connection traversing`
            if _hostish(name) and len(name) > 1 and not _ENV_NAME.fullmatch(name):
                yield "HOST", name  # a Slurm node list is expanded by the caller
    for m in _TUPLE.finditer(text):
        if _hostish(m.group(1)):
            yield "HOST", m.group(1)
    pdsh = Counter(m.group(1) for m in _PDSH.finditer(text))
    for name, count in pdsh.items():
        hostlike = bool(re.search(r"\d", name)) or (name.islower() and name not in _LINE_WORDS)
        if count >= 2 and hostlike and not _NOT_PDSH.match(name):
            yield "HOST", name
    for m in _USER_CTX.finditer(text):
        user = next(g for g in m.groups() if g).rstrip(".-")
        if user.lower() not in NOT_USERS:
            yield "USER", user
    for m in _USER_AT_HOST.finditer(text):
        if m.group(1).lower() not in NOT_USERS:
            yield "USER", m.group(1)
        yield "HOST", m.group(2)
