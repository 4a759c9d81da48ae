"""Container health check for the node agent (standard library only): GET /health.

Plain HTTP by default; HTTPS when NCCLBOT_AGENT_TLS_CERT is set. With mutual TLS
(NCCLBOT_AGENT_CA_FILE on the agent) a client certificate is needed even for
/health, so the check presents the agent's own cert/key, which the CA signed.
"""

from __future__ import annotations

import json
import os
import ssl
import sys
import urllib.request


def main() -> int:
    port = os.environ.get("NCCLBOT_AGENT_PORT", "8470")
    cert = os.environ.get("NCCLBOT_AGENT_TLS_CERT")
    key = os.environ.get("NCCLBOT_AGENT_TLS_KEY")
    ctx = None
    scheme = "http"
    if cert:
        scheme = "https"
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE  # loopback; we only ask whether it is up
        if key:
            ctx.load_cert_chain(cert, key)
    try:
        with urllib.request.urlopen(f"{scheme}://127.0.0.1:{port}/health", timeout=4,
                                    context=ctx) as r:
            return 0 if json.load(r).get("status") == "ok" else 1
    except (OSError, ValueError, ssl.SSLError):
        return 1


if __name__ == "__main__":
    sys.exit(main())
