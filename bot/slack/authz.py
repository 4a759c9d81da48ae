"""Who may run diagnostics on nodes: on-call usergroup members (cached) or listed users."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable

from slack_sdk import WebClient

log = logging.getLogger(__name__)


class OncallAuthz:
    """Membership of NCCLBOT_ONCALL_USERGROUP (usergroups.users.list) or NCCLBOT_ONCALL_USERS."""

    def __init__(self, client: WebClient, usergroup: str | None, users: Iterable[str] = (),
                 ttl_s: float = 300.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.client = client
        self.usergroup = usergroup
        self.users = {u.strip() for u in users if u.strip()}
        self.ttl_s = ttl_s
        self._clock = clock
        self._members: set[str] = set()
        self._fetched: float | None = None
        self._lock = threading.Lock()

    def _fresh(self) -> bool:
        return self._fetched is not None and self._clock() - self._fetched < self.ttl_s

    def group_members(self) -> set[str]:
        """The on-call group's members, from the cache while it is fresh (`ttl_s`)."""
        if not self.usergroup:
            return set()
        with self._lock:
            if self._fresh():
                return self._members
            try:
                resp = self.client.usergroups_users_list(usergroup=self.usergroup)
                self._members = set(resp.get("users") or [])
                self._fetched = self._clock()
            except Exception as exc:  # noqa: BLE001 - fail closed, keep the last known list
                log.warning("usergroups.users.list failed: %s", exc)
            return self._members

    def allowed(self, user: str) -> bool:
        return user in self.users or user in self.group_members()

    def allowed_now(self, user: str) -> bool | None:
        """Like `allowed`, without calling Slack: None when only a lookup could tell."""
        if user in self.users:
            return True
        if not self.usergroup:
            return False
        with self._lock:
            return (user in self._members) if self._fresh() else None

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


def may_resolve(authz: OncallAuthz, user: str, asker: str | None,
                resolver: str | None = None) -> bool:
    """Who may resolve a thread, correct or forget its resolution: the person who asked in
    it, whoever resolved it, and on-call people."""
    return bool(user) and (user in (asker, resolver) or authz.allowed(user))
