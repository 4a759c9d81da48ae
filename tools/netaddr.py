"""Address helpers shared by the probe launcher and the agent's request guard."""

from __future__ import annotations

import ipaddress


def is_loopback_ip(host: str) -> bool:
    """True for a literal loopback address (127.0.0.0/8, ::1); False for names."""
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
