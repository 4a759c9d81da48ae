"""One status message per request, updated in place, then replaced by the answer."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from slack_sdk import WebClient

from bot.slack.blocks import Rendered, status, wire

log = logging.getLogger(__name__)


class StatusMessage:
    """Posts "working…" in the thread, throttles updates, and swaps in the final message."""

    def __init__(self, client: WebClient, channel: str, thread_ts: str | None, text: str,
                 min_interval_s: float = 1.0) -> None:
        self.client, self.channel, self.thread_ts = client, channel, thread_ts
        self.min_interval_s = min_interval_s
        self._last = 0.0
        self._lock = threading.Lock()
        r = status(text)
        resp = client.chat_postMessage(channel=channel, thread_ts=thread_ts, text=r.text,
                                       blocks=wire(r.blocks))
        self.ts: str = resp["ts"]
        self.channel = resp.get("channel") or channel
        self._last = time.monotonic()

    def update(self, text: str, force: bool = False) -> None:
        """Show progress; skipped when the last update was under `min_interval_s` ago."""
        with self._lock:
            now = time.monotonic()
            if not force and now - self._last < self.min_interval_s:
                return
            self._last = now
        r = status(text)
        try:
            self.client.chat_update(channel=self.channel, ts=self.ts, text=r.text,
                                    blocks=wire(r.blocks))
        except Exception as exc:  # noqa: BLE001 - progress is best effort
            log.warning("status update failed: %s", exc)

    def finish(self, rendered: Rendered) -> None:
        """Replace the status with the final message (post anew if the update fails)."""
        try:
            self.client.chat_update(channel=self.channel, ts=self.ts, text=rendered.text,
                                    blocks=wire(rendered.blocks))
        except Exception as exc:  # noqa: BLE001 - fall back to a new message
            log.warning("chat.update failed (%s); posting the answer instead", exc)
            self.client.chat_postMessage(channel=self.channel, thread_ts=self.thread_ts,
                                         text=rendered.text, blocks=wire(rendered.blocks))


class Ticker:
    """Calls `fn(elapsed_s)` every `every_s` seconds in a thread until stopped."""

    def __init__(self, fn: Callable[[float], None], every_s: float = 5.0) -> None:
        self._fn, self._every = fn, every_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._t0 = time.monotonic()

    def __enter__(self) -> Ticker:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=2)

    def _run(self) -> None:
        while not self._stop.wait(self._every):
            self._fn(time.monotonic() - self._t0)
