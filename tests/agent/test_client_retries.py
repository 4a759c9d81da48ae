"""The client's bounded retries and timeouts, against a real HTTP server on 127.0.0.1
that answers 503 a few times, or too slowly."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from bot.nodes.client import AgentError, NodeClient
from bot.nodes.inventory import Node

RESULT = {"tool": "env", "status": "success", "data": {}, "findings": [], "error": None,
          "invocation": "env"}


class Flaky:
    """Answers `fail` 503s per path before a 200, or sleeps `delay` s on /v1/topo."""

    def __init__(self, fail: int = 0, delay: float = 0.0) -> None:
        self.fail, self.delay = fail, delay
        self.hits: dict[str, int] = {}
        self.lock = threading.Lock()

    def handler(self) -> type[BaseHTTPRequestHandler]:
        flaky = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with flaky.lock:
                    n = flaky.hits[self.path] = flaky.hits.get(self.path, 0) + 1
                if self.path == "/v1/topo":
                    time.sleep(flaky.delay)
                body, code = json.dumps(RESULT).encode(), 200
                if n <= flaky.fail:
                    body, code = b'{"detail": "overloaded"}', 503
                try:
                    self.send_response(code)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:  # the client gave up (timeout test)
                    pass

        return Handler


@pytest.fixture
def server(request: pytest.FixtureRequest) -> Iterator[tuple[Flaky, str]]:
    flaky = Flaky(**getattr(request, "param", {}))
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), flaky.handler())
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield flaky, f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def _client(url: str, **kw: object) -> NodeClient:
    return NodeClient(Node(name="flaky-node", url=url), b"k" * 32, "cli:t", backoff_s=0.01,
                      **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("server", [{"fail": 2}], indirect=True)
def test_reads_are_retried_until_they_succeed(server: tuple[Flaky, str]) -> None:
    flaky, url = server
    with _client(url, retries=2) as c:
        assert c.run("env").status == "success"
    assert flaky.hits["/v1/env"] == 3


@pytest.mark.parametrize("server", [{"fail": 5}], indirect=True)
def test_retries_are_bounded_and_probes_never_retried(server: tuple[Flaky, str]) -> None:
    flaky, url = server
    with _client(url, retries=2) as c:
        with pytest.raises(AgentError) as err:
            c.run("env")
        assert err.value.kind == "http" and "HTTP 503" in err.value.message
        assert flaky.hits["/v1/env"] == 3
        with pytest.raises(AgentError):
            c.run("probe", {"backend": "gloo"})
    assert flaky.hits["/v1/probe"] == 1  # a probe may have started: never sent twice


@pytest.mark.parametrize("server", [{"delay": 3.0}], indirect=True)
def test_slow_agent_times_out_with_a_clear_error(server: tuple[Flaky, str]) -> None:
    flaky, url = server
    with _client(url, retries=1, timeout=0.5) as c, pytest.raises(AgentError) as err:
        c.run("topo")
    assert err.value.kind == "timeout" and "timed out after 0.5 s" in err.value.message
    assert "flaky-node" in err.value.message and flaky.hits["/v1/topo"] == 2
