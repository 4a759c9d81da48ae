"""Start the agent under uvicorn: refuse root, load the secret, TLS (optionally mutual)."""

from __future__ import annotations

import os
import ssl
from pathlib import Path

from typing_extensions import TypedDict


class StartError(Exception):
    """The agent cannot start; the message says why and what to do."""


def check_user(allow_root: bool, euid: int | None = None) -> None:
    euid = os.geteuid() if euid is None else euid
    if euid == 0 and not allow_root:
        raise StartError("refusing to run the node agent as root; run it as an unprivileged "
                         "user (see docs/agent.md), or pass --allow-root if you must")


class TlsOptions(TypedDict, total=False):
    """uvicorn's TLS keyword arguments."""

    ssl_certfile: str
    ssl_keyfile: str
    ssl_ca_certs: str
    ssl_cert_reqs: int


def tls_options(cert: Path | None, key: Path | None, ca: Path | None) -> TlsOptions:
    """uvicorn TLS keyword arguments; a CA file turns on mutual TLS (client certs required)."""
    if (cert is None) != (key is None):
        raise StartError("TLS needs both NCCLBOT_AGENT_TLS_CERT and NCCLBOT_AGENT_TLS_KEY")
    if cert is None:
        if ca is not None:
            raise StartError("NCCLBOT_AGENT_CA_FILE (mutual TLS) needs a server cert and key")
        return TlsOptions()
    opts = TlsOptions(ssl_certfile=str(cert), ssl_keyfile=str(key))
    if ca is not None:
        opts["ssl_ca_certs"], opts["ssl_cert_reqs"] = str(ca), ssl.CERT_REQUIRED
    return opts


def serve(settings: object, host: str, port: int, audit_log: Path | None = None,
          allow_root: bool = False, force_users: list[str] | None = None,
          names: list[str] | None = None) -> None:
    """Run until interrupted."""
    import uvicorn

    from tools.agent.app import create_app
    from tools.agent.door import guarded_protocol

    check_user(allow_root)
    tls = tls_options(getattr(settings, "agent_tls_cert", None),
                      getattr(settings, "agent_tls_key", None),
                      getattr(settings, "agent_ca_file", None))
    try:
        app = create_app(settings, audit_log=audit_log, force_users=force_users or None,
                         names=names)
    except ValueError as exc:
        raise StartError(str(exc)) from exc
    door = app.state.door
    # idle or slow sockets must not crowd out signed requests: no uvicorn-wide
    # limit_concurrency (its 503s come before any audit and lock everyone out); the door's
    # protocol closes idle sockets and caps them per address, the Guard bounds unverified
    # requests and keeps a lane for signed ones (tools/agent/door.py)
    uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False,
                http=guarded_protocol(door), timeout_keep_alive=int(door.limits.idle_timeout_s),
                h11_max_incomplete_event_size=door.limits.max_head_bytes,
                server_header=False, **tls)
