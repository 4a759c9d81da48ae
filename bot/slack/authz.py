"""Who may run diagnostics on nodes: on-call usergroup members (cached) or listed users."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable
from typing import Any

log = logging.getLogger(__name__)


class OncallAuthz:
    """Membership of NCCLBOT_ONCALL_USERGROUP (usergroups.users.list) or NCCLBOT_ONCALL_USERS."""

    def __init__(self, client: Any, usergroup: str | None, users: Iterable[str] = (),
                 ttl_s: float = 300.0) -> None:
        self.client = client
        self.usergroup = usergroup
        self.users = {u.strip() for u in users if u.strip()}
        self.ttl_s = ttl_s
        self._members: set[str] = set()
        self._fetched = 0.0
        self._lock = threading.Lock()

    def group_members(self) -> set[str]:
        if not self.usergroup:
            return set()
        with self._lock:
            if time.monotonic() - self._fetched < self.ttl_s and self._fetched:
                return self._members
            try:
                resp = self.client.usergroups_users_list(usergroup=self.usergroup)
                self._members = set(resp.get("users") or [])
                self._fetched = time.monotonic()
            except Exception as exc:  # noqa: BLE001 - fail closed, keep the last known list
                log.warning("usergroups.users.list failed: %s", exc)
            return self._members

    def allowed(self, user: str) -> bool:
        return user in self.users or user in self.group_members()

    def who(self) -> str:
        """Who may run probes, in Slack mrkdwn."""
        parts = []
        if self.usergroup:
            parts.append(f"members of <!subteam^{self.usergroup}>")
        if self.users:
            parts.append(", ".join(f"<@{u}>" for u in sorted(self.users)))
        if not parts:
            return "nobody yet: an admin must set NCCLBOT_ONCALL_USERGROUP or NCCLBOT_ONCALL_USERS"
        return " or ".join(parts)
