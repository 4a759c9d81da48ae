"""Redaction of secrets before anything leaves the node or reaches an LLM.

Pure functions: a variable whose name looks secret has its whole value
replaced; credential-shaped substrings (Hugging Face, OpenAI, Slack, AWS,
GitHub, GitLab tokens, JWTs, private keys, URL passwords, bearer tokens,
`password=...` pairs) are replaced anywhere in text.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

REDACTED = "[REDACTED]"

#: Substrings that make a variable name secret wherever they appear.
_NAME_SUBSTRINGS = ("TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "COOKIE",
                    "APIKEY", "API_KEY", "PRIVATE_KEY", "ACCESS_KEY", "SIGNING", "ACCOUNTKEY",
                    "SHAREDACCESSKEY", "SSHPASS")
#: Whole `_`-separated words that make a name secret (so NCCL_IB_PKEY stays visible).
_NAME_WORDS = frozenset({"KEY", "KEYS", "AUTH", "PASS", "PWD_HASH", "SESSION", "SIG", "DSN"})

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
    r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}",
    r"\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{10,}",  # Stripe-style keys
    r"(?<=hooks\.slack\.com/services/)[A-Z0-9]+/[A-Z0-9]+/[A-Za-z0-9]+",  # Slack webhooks
    r"\bnpm_[A-Za-z0-9]{30,}",
    r"\bpypi-[A-Za-z0-9_\-]{30,}",
))
_URL_PASSWORD = re.compile(r"(\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^\s:/@]*:)([^\s@/]+)(@)")
_BEARER = re.compile(r"(\b(?:Bearer|Basic|Token)\s+)([A-Za-z0-9._~+/\-]{12,}=*)", re.IGNORECASE)
_PAIR = re.compile(
    r"((?:\"|')?\b[\w.\-]*(?:password|passwd|secret|token|api[_-]?key|access[_-]?key|cookie)"
    r"[\w.\-]*(?:\"|')?\s*[:=]\s*)(\"[^\"]*\"|'[^']*'|[^\s,;&]+)",
    re.IGNORECASE,
)


#: Names that mention tokens but hold counts or model names (`max_tokens`, `tokenizer`).
_NOT_SECRET = re.compile(r"(?i)(?:^|[_\-.\"'])(?:max|min|num|count|per|total)[_\-]|tokeni[sz]er"
                         r"|tokens\b")


def is_secret_name(name: str) -> bool:
    """True when a variable or key name looks like it holds a secret."""
    upper = name.upper()
    if any(s in upper for s in _NAME_SUBSTRINGS):
        return True
    return any(w in _NAME_WORDS for w in re.split(r"[_\-.]", upper))


def redact_text(text: str) -> str:
    """Replace credential-shaped substrings in free text."""
    for pat in _VALUE_PATTERNS:
        text = pat.sub(REDACTED, text)
    text = _URL_PASSWORD.sub(rf"\g<1>{REDACTED}\g<3>", text)
    text = _BEARER.sub(rf"\g<1>{REDACTED}", text)
    return _PAIR.sub(lambda m: m.group(0) if _NOT_SECRET.search(m.group(1))
                     else m.group(1) + (REDACTED if m.group(2) != REDACTED else m.group(2)),
                     text)


def redact_value(name: str, value: str) -> str:
    """A variable's value for output: fully redacted when the name is secret."""
    if is_secret_name(name):
        return REDACTED if value else value
    return redact_text(value)


def redact_env(environ: Mapping[str, str]) -> dict[str, str]:
    """A copy of `environ` safe to print or send."""
    return {k: redact_value(k, v) for k, v in environ.items()}
