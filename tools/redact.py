"""Redaction of secrets before anything leaves the node, reaches an LLM or Slack.

Pure functions, one rule set for every door: the node's tool outputs and hang samples'
command lines, Slack's client (`bot.slack.redacting`) and the model's requests
(`bot.agent.redact`) all call `redact_text`.

- A name that looks secret (`HF_TOKEN`, `DB_PASSWORD`, `NCCL_IB_PWD`, `client_secret`,
  `--wandb-key`) has its whole value replaced, wherever it is written as `NAME=value`,
  `"name": "value"`, `name: value`, `--flag value`, or NCCL's echo of a parameter
  (`NAME set by environment to VALUE`).
- Credential shapes are replaced anywhere (Hugging Face, OpenAI, Slack, AWS, GitHub,
  GitLab, Databricks tokens, JWTs such as Kubernetes service-account tokens, PEM and DER
  private keys, URL passwords, bearer headers, `pwd=` in connection strings).
- JSON is redacted as JSON: a payload that parses (or a JSON object inside a line) is
  walked, every value under a secret-looking key goes whatever its type, and the text
  rules run on the string leaves (`"DB_PASSWORD=\\"a b c d\\""` loses all four words).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

REDACTED = "[REDACTED]"

#: Substrings that make a variable name secret wherever they appear.
_NAME_SUBSTRINGS = ("TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "COOKIE",
                    "APIKEY", "API_KEY", "PRIVATE_KEY", "ACCESS_KEY", "SIGNING", "ACCOUNTKEY",
                    "SHAREDACCESSKEY", "SSHPASS", "PRIVATEKEY", "CLIENTSECRET")
#: Whole `_`-separated words that make a name secret (so NCCL_IB_PKEY stays visible).
_NAME_WORDS = frozenset({"KEY", "KEYS", "AUTH", "PASS", "SESSION", "SIG", "DSN"})
#: Names that mention tokens but hold counts or model names (`max_tokens`, `tokenizer`).
_COUNTISH = re.compile(r"(?i)(?:^|[_-])(?:max|min|num|count|per|total)(?:[_-]|$)"
                       r"|tokeni[sz]er")
#: In `name: value` prose, `tokens` is a count too (`tokens: 512`).
_PAIR_COUNTISH = re.compile(r"(?i)(?:^|[_\-.\"'])(?:max|min|num|count|per|total)[_\-]"
                            r"|tokeni[sz]er|tokens\b")


def is_secret_name(name: str) -> bool:
    """True when a variable or key name looks like it holds a secret (`*_PWD` too, but
    not the shell's own `PWD` / `OLDPWD`)."""
    upper = name.upper()
    if any(s in upper for s in _NAME_SUBSTRINGS):
        return True
    words = [w for w in re.split(r"[_\-.\s]", upper) if w]
    if len(words) > 1 and words[-1] in ("PWD", "PASSWD"):
        return True
    return any(w in _NAME_WORDS for w in words)


def secret_key(name: str) -> bool:
    """A key or flag name whose value is secret (`max_tokens` and the like are counts)."""
    return is_secret_name(name) and not _COUNTISH.search(name)


def is_secret_flag(arg: str) -> bool:
    """`--password`, `--api-key`, `-token`: a command-line flag whose value is secret."""
    return bool(re.fullmatch(r"--?[A-Za-z][\w-]*", arg)) and secret_key(arg.lstrip("-"))


# -- value shapes -----------------------------------------------------------------------------
_VALUE_PATTERNS: tuple[re.Pattern[str], ...] = tuple(re.compile(p) for p in (
    r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)",
    r"\bhf_[A-Za-z0-9]{20,}",
    r"\bsk-(?:proj-|ant-|live-|test-)?[A-Za-z0-9_\-]{20,}",
    r"\bxox[abposr]-[A-Za-z0-9\-]{10,}",
    r"\bxapp-[A-Za-z0-9\-]{10,}",
    r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b",
    r"\bgh[pousr]_[A-Za-z0-9]{30,}",
    r"\bgithub_pat_[A-Za-z0-9_]{30,}",
    r"\bglpat-[A-Za-z0-9_\-]{20,}",
    r"\bAIza[0-9A-Za-z_\-]{35}",
    # JWTs (Kubernetes service-account tokens, OIDC): three base64url parts, header first
    r"\beyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}",
    r"\bdapi[0-9a-f]{32}(?:-\d+)?\b",  # Databricks personal access tokens
    r"\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{10,}",  # Stripe-style keys
    r"(?<=hooks\.slack\.com/services/)[A-Z0-9]+/[A-Z0-9]+/[A-Za-z0-9]+",  # Slack webhooks
    r"\bnpm_[A-Za-z0-9]{30,}",
    r"\bpypi-[A-Za-z0-9_\-]{30,}",
    r"\bMII[A-Za-z0-9+/]{20,}={0,2}",  # DER private keys, base64
))
_URL_PASSWORD = re.compile(r"(\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^\s:/@]*:)([^\s@/]+)(@)")
_BEARER = re.compile(r"(\b(?:Bearer|Basic|Token)\s+)([A-Za-z0-9._~+/\-]{12,}=*)", re.IGNORECASE)
#: A quoted value: `"..."`, `'...'`, or `\"...\"` as it stands inside a JSON string.
_QUOTED = r"\\\"(?:[^\"\\]|\\[^\"])*\\\"|\"[^\"]*\"|'[^']*'"
_PAIR = re.compile(
    r"((?:\\?\"|')?\b[\w.\-]*(?:password|passwd|secret|token|api[_-]?key|access[_-]?key|cookie)"
    r"[\w.\-]*(?:\\?\"|')?\s*[:=]\s*)(" + _QUOTED + r"|[^\s,;&]+)",
    re.IGNORECASE,
)
#: `"name": value` (a quoted key) and `snake_name: value`: the key decides.
_KEYED = re.compile(r"((?:\\?\"|')([A-Za-z_][\w.\-]*)(?:\\?\"|')\s*:\s*"
                    r"|(?<![\w.\-])([A-Za-z][A-Za-z0-9]*[_\-][\w\-]*)\s*:\s+)"
                    r"(" + _QUOTED + r"|(?![\[{])[^\s,;&}\]]+)")
_ASSIGN = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*)=(" + _QUOTED + r"|[^\s,;&]+)")
_FLAG = re.compile(r"(?<![\w-])(--?[A-Za-z][\w-]*)(\s+|=)(?!-)(" + _QUOTED
                   + r"|[^\s\"']+)")
# NCCL's echo of a parameter it read (src/misc/param.cc, NVIDIA/nccl nccl4py-v0.3.1):
#   INFO(NCCL_ENV, "%s set by environment to %lld.", env, (long long)value);
#   INFO(NCCL_ALL, "Invalid value %s for %s, using default %lld.", str, env, ...);
# and string parameters (src/bootstrap.cc): "NCCL_COMM_ID set by environment to %s"
_SET_BY_ENV = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*) set by environment to ([^\n]*?)(\.?)$",
                         re.MULTILINE)
_INVALID_VALUE = re.compile(r"\bInvalid value (\S+) for ([A-Za-z_][A-Za-z0-9_]*),")
_CMD_PASSWORD = re.compile(
    r"\b(?:mysql|mysqldump|mysqladmin|mariadb|mariadb-dump)\b[^\n]*?(?<=\s)-p(?=[^\s-])(\S+)"
    r"|\bsshpass\s+-p\s*(\S+)"
    r"|\bredis-cli\b[^\n]*?\s-a\s+(\S+)"
    r"|\b(?:docker|podman|nerdctl|helm|oras)\s+(?:registry\s+)?login\b[^\n]*?\s-p\s+(\S+)"
    r"|\b(?:curl|wget)\b[^\n]*?\s(?:-u|--user)[\s=]+[^:\s]+:(\S+)"
    r"|\b[A-Z][A-Z0-9_]*(?:TOKEN|SECRET|PASSWORD|PASSWD|API_KEY|ACCESS_KEY)[A-Z0-9_]*"
    r"\s+(?!=|set\b)([A-Za-z0-9+/_\-.]{12,}={0,2})")
#: A 40-character AWS-style secret access key, even with no "aws" nearby: mixed case,
#: digits and a slash or plus (paths and hashes rarely have all of them).
_AWS_SHAPE = re.compile(r"(?<![A-Za-z0-9/+=])(?=[A-Za-z0-9/+]*[/+])(?=[A-Za-z0-9/+]*[a-z])"
                        r"(?=[A-Za-z0-9/+]*[A-Z])(?=[A-Za-z0-9/+]*\d)[A-Za-z0-9/+]{40}"
                        r"(?![A-Za-z0-9/+=])")
_LABELLED_KEY = re.compile(
    r"(?i)\b(?:api[ _-]?key|access[ _-]?token|secret[ _-]?(?:access[ _-]?)?key|private[ _-]?key"
    r"|auth[ _-]?token)\b['\"]?(?:\s+is)?\s*[:=]?\s*['\"]?([A-Za-z0-9+/_\-]{16,}={0,2})")
_WANDB_KEY = re.compile(r"(?i)\bwandb\b[^\n]*?(?<![0-9a-f])([0-9a-f]{40})(?![0-9a-f])")
_WANDB_LOGIN = re.compile(r"(?i)\bwandb\s+login\s+(?:--?\S+\s+)*(\S{32,})")
_B64_40 = re.compile(r"(?<![A-Za-z0-9/+=])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])")
_AWS_NEAR = re.compile(r"(?i)aws|\bAKIA|\bASIA")
#: `pwd=` / `Pwd=` in a connection string (ODBC `;`-separated, URL query, libpq keywords);
#: the shell's `PWD=/path` of an environment dump stays.
_DSN_PWD = re.compile(r"(?i:(?<=[;?&])\s*pwd\s*=\s*|(?<![\w$])(?-i:pwd|Pwd)\s*=\s*"
                      r"|(?<![\w$])(?i:pwd)=(?=[^;\s]*;))"
                      r"(\{[^}]*\}|\"[^\"]*\"|'[^']*'|[^;\s&\"']+)")
#: Where a JSON object or array may start inside a line of text.
_JSON_START = re.compile(r"[\[{]\s*(?=[\"\[{]|\\\")")
#: Bounds for finding JSON inside text: lines longer than this, and more starts than this
#: per line, are left to the text rules.
_EMBED_MAX_LINE = 256 * 1024
_EMBED_MAX_STARTS = 64
_EMBED_MAX_BLOCK = 8 * 1024 * 1024
_JSON_MAX_DEPTH = 64


def _blank_group(m: re.Match[str]) -> str:
    """The match with its (first non-empty) group replaced by REDACTED."""
    for i in range(1, (m.lastindex or 0) + 1):
        if m.group(i):
            start, end = m.start(i) - m.start(), m.end(i) - m.start()
            return m.group(0)[:start] + REDACTED + m.group(0)[end:]
    return m.group(0)


def _has_mix(token: str) -> bool:
    return bool(re.search(r"[a-z]", token) and re.search(r"[A-Z]", token)
                and re.search(r"[\d/+]", token))


def _aws_secret(text: str) -> str:
    def sub(m: re.Match[str]) -> str:
        window = text[max(0, m.start() - 200): m.end() + 200]
        return REDACTED if _has_mix(m.group(0)) and _AWS_NEAR.search(window) else m.group(0)

    return _B64_40.sub(sub, text)


def _unquoted(value: str) -> str:
    return value.replace('\\"', '"').strip("\"'")


def _keep_or_blank(prefix: str, value: str) -> str:
    """`prefix` and REDACTED, keeping the value's quotes (a JSON string stays a string)."""
    if value == REDACTED or _unquoted(value) in ("", REDACTED):
        return prefix + value
    for q in ('\\"', '"', "'"):
        if len(value) >= 2 * len(q) and value.startswith(q) and value.endswith(q):
            return f"{prefix}{q}{REDACTED}{q}"
    return prefix + REDACTED


def _text_rules(text: str) -> str:
    """Every text rule, in order (idempotent)."""
    for pat in _VALUE_PATTERNS:
        text = pat.sub(REDACTED, text)
    text = _aws_secret(text)
    text = _AWS_SHAPE.sub(REDACTED, text)
    text = _SET_BY_ENV.sub(lambda m: f"{m.group(1)} set by environment to {REDACTED}{m.group(3)}"
                           if secret_key(m.group(1)) and m.group(2) else m.group(0), text)
    text = _INVALID_VALUE.sub(lambda m: f"Invalid value {REDACTED} for {m.group(2)},"
                              if secret_key(m.group(2)) else m.group(0), text)
    for rx in (_CMD_PASSWORD, _WANDB_KEY, _WANDB_LOGIN):
        text = rx.sub(_blank_group, text)
    text = _LABELLED_KEY.sub(lambda m: _blank_group(m) if re.search(r"\d", m.group(1))
                             and m.group(1) != REDACTED else m.group(0), text)
    text = _URL_PASSWORD.sub(rf"\g<1>{REDACTED}\g<3>", text)
    text = _BEARER.sub(rf"\g<1>{REDACTED}", text)
    text = _PAIR.sub(lambda m: m.group(0) if _PAIR_COUNTISH.search(m.group(1))
                     else _keep_or_blank(m.group(1), m.group(2)), text)
    text = _keyed(text)
    text = _DSN_PWD.sub(lambda m: _blank_group(m) if m.group(1) != REDACTED else m.group(0),
                        text)
    text = _assign(text)
    return _flag(text)


# A value quoted after a name that is not secret may hold `NAME=secret` itself
# (`"cmd": "DB_PASSWORD=x ..."`, `--env "TOKEN=x"`): the rule runs again inside it.
def _keyed(text: str) -> str:
    return _KEYED.sub(lambda m: _keep_or_blank(m.group(1), m.group(4))
                      if secret_key(m.group(2) or m.group(3) or "")
                      else m.group(1) + _inside(m.group(4), _keyed), text)


def _assign(text: str) -> str:
    return _ASSIGN.sub(lambda m: _keep_or_blank(m.group(1) + "=", m.group(2))
                       if secret_key(m.group(1))
                       else m.group(1) + "=" + _inside(m.group(2), _assign), text)


def _flag(text: str) -> str:
    return _FLAG.sub(lambda m: _keep_or_blank(m.group(1) + m.group(2), m.group(3))
                     if is_secret_flag(m.group(1))
                     else m.group(1) + m.group(2) + _inside(m.group(3), _flag), text)


def _inside(value: str, rule: Callable[[str], str]) -> str:
    """`rule` applied inside a quoted value (its quotes kept); other values unchanged."""
    for q in ('\\"', '"', "'"):
        if len(value) > 2 * len(q) and value.startswith(q) and value.endswith(q):
            return q + rule(value[len(q):-len(q)]) + q
    return value


# -- JSON as JSON -----------------------------------------------------------------------------
def _blank(obj: Any) -> Any:
    """Every leaf of a value under a secret key, gone (booleans, nulls and empties stay)."""
    if isinstance(obj, dict):
        return {k: _blank(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_blank(v) for v in obj]
    if isinstance(obj, bool) or obj is None or obj == "":
        return obj
    return REDACTED


def redact_json(obj: Any, key: str | None = None, depth: int = 0) -> Any:
    """A JSON-like value without secrets: values under secret keys go entirely, the value
    after a secret flag in an argv list goes, and every string (and key) passes the text
    rules."""
    if key is not None and secret_key(key):
        counted = isinstance(obj, (int, float)) and not isinstance(obj, bool)
        return obj if counted and _PAIR_COUNTISH.search(key) else _blank(obj)
    if depth > _JSON_MAX_DEPTH:
        return REDACTED if isinstance(obj, (dict, list, tuple, str)) else obj
    if isinstance(obj, str):
        return redact_text(obj)
    if isinstance(obj, dict):
        return {redact_text(k) if isinstance(k, str) else k:
                redact_json(v, str(k), depth + 1) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        out = []
        for i, v in enumerate(obj):
            after_flag = i > 0 and isinstance(obj[i - 1], str) and is_secret_flag(obj[i - 1])
            out.append(REDACTED if after_flag and isinstance(v, (str, int, float))
                       and not isinstance(v, bool) else redact_json(v, key, depth + 1))
        return out
    return obj


def as_json(text: str) -> Any:
    """`text` parsed as one JSON object or array, or None."""
    stripped = text.strip()
    if stripped[:1] not in ("{", "[") or stripped[-1:] not in ("}", "]"):
        return None
    try:
        return json.loads(stripped)
    except (ValueError, RecursionError):
        return None


_DECODER = json.JSONDecoder()


def _embedded_json(line: str) -> str:
    """`line` with each JSON object or array inside it redacted as JSON (same layout
    where nothing was secret)."""
    if len(line) > _EMBED_MAX_LINE or ("{" not in line and "[" not in line):
        return line
    out: list[str] = []
    pos, tries = 0, 0
    for m in _JSON_START.finditer(line):
        if m.start() < pos:
            continue
        tries += 1
        if tries > _EMBED_MAX_STARTS:
            break
        try:
            obj, end = _DECODER.raw_decode(line, m.start())
        except (ValueError, RecursionError):
            continue
        if not isinstance(obj, (dict, list)):
            continue
        original = line[m.start():end]
        redacted = redact_json(obj)
        out.append(line[pos:m.start()])
        out.append(original if redacted == obj else json.dumps(redacted, ensure_ascii=False))
        pos = end
    if pos == 0:
        return line
    out.append(line[pos:])
    return "".join(out)


def redact_text(text: str) -> str:
    """`text` without secrets (idempotent): as JSON when it is a JSON document, JSON objects
    inside lines as JSON, then every text rule."""
    data = as_json(text)
    if data is not None and isinstance(data, (dict, list)):
        redacted = redact_json(data)
        if redacted == data:
            return text
        indent = 2 if "\n" in text.strip() else None
        return json.dumps(redacted, ensure_ascii=False, indent=indent)
    if "{" in text or "[" in text:
        text = _json_blocks(text)
        text = "\n".join(_embedded_json(line) for line in text.split("\n"))
    return _text_rules(text)


#: A pretty-printed JSON document inside a longer text starts a line with `{` or `[`.
_BLOCK_START = re.compile(r"(?m)^[ \t]*[\[{][ \t]*$|^[ \t]*[\[{][ \t]*(?=\")")


def _json_blocks(text: str) -> str:
    """`text` with each JSON document spanning several lines (a report's ```json block, a
    dumped config) redacted as JSON, in the same layout."""
    if "\n" not in text or len(text) > _EMBED_MAX_BLOCK:
        return text
    out: list[str] = []
    pos, tries = 0, 0
    for m in _BLOCK_START.finditer(text):
        start = m.start() + len(m.group(0)) - len(m.group(0).lstrip())
        if start < pos:
            continue
        tries += 1
        if tries > _EMBED_MAX_STARTS:
            break
        try:
            obj, end = _DECODER.raw_decode(text, start)
        except (ValueError, RecursionError):
            continue
        if not isinstance(obj, (dict, list)) or "\n" not in text[start:end]:
            continue
        redacted = redact_json(obj)
        out.append(text[pos:start])
        out.append(text[start:end] if redacted == obj
                   else json.dumps(redacted, ensure_ascii=False, indent=2))
        pos = end
    if pos == 0:
        return text
    out.append(text[pos:])
    return "".join(out)


def redact_argv(argv: Iterable[str]) -> list[str]:
    """An argument vector without secrets: the value after a secret flag goes whole (even
    with spaces in it), and every argument passes the text rules."""
    out: list[str] = []
    for arg in argv:
        out.append(REDACTED if out and is_secret_flag(out[-1]) else redact_text(arg))
    return out


def redact_value(name: str, value: str) -> str:
    """A variable's value for output: fully redacted when the name is secret."""
    if is_secret_name(name):
        return REDACTED if value else value
    return redact_text(value)


def redact_env(environ: Mapping[str, str]) -> dict[str, str]:
    """A copy of `environ` safe to print or send."""
    return {k: redact_value(k, v) for k, v in environ.items()}
