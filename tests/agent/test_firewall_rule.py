"""deploy/firewall/ncclbot-agent.nft does what docs/agent.md says, in real network
namespaces joined by a veth pair: the bot reaches 8470, another address does not, other
ports stay open, and the bot's concurrent connections are capped. Needs root, nft and ip
(skipped otherwise); the namespaces are removed afterwards."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

RULES = Path(__file__).resolve().parents[2] / "deploy" / "firewall" / "ncclbot-agent.nft"
AGENT_IP, BOT_IP, OTHER_IP = "192.0.2.1", "192.0.2.2", "192.0.2.3"


def _run(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=check)


def test_rules_parse() -> None:
    if shutil.which("nft") is None:
        pytest.skip("nft is not installed")
    out = _run("nft", "-c", "-f", str(RULES), check=False)
    if out.returncode and "Operation not permitted" in out.stderr:
        pytest.skip("nft -c needs CAP_NET_ADMIN here")
    assert out.returncode == 0, out.stderr


@pytest.fixture
def namespaces(tmp_path: Path) -> Iterator[tuple[str, str]]:
    if os.geteuid() != 0 or shutil.which("nft") is None or shutil.which("ip") is None:
        pytest.skip("needs root, nft and ip (iproute2)")
    tag = f"{os.getpid() % 100000}"
    agent, peer = f"ncb-ag{tag}", f"ncb-pe{tag}"
    if _run("ip", "netns", "add", agent, check=False).returncode:
        pytest.skip("cannot create network namespaces here")
    try:
        _run("ip", "netns", "add", peer)
        _run("ip", "link", "add", f"va{tag}", "type", "veth", "peer", "name", f"vp{tag}")
        _run("ip", "link", "set", f"va{tag}", "netns", agent)
        _run("ip", "link", "set", f"vp{tag}", "netns", peer)
        _run("ip", "-n", agent, "addr", "add", f"{AGENT_IP}/24", "dev", f"va{tag}")
        for ns, dev in ((agent, f"va{tag}"), (peer, f"vp{tag}")):
            _run("ip", "-n", ns, "link", "set", dev, "up")
            _run("ip", "-n", ns, "link", "set", "lo", "up")
        for ip in (BOT_IP, OTHER_IP):
            _run("ip", "-n", peer, "addr", "add", f"{ip}/24", "dev", f"vp{tag}")
        rules = tmp_path / "rules.nft"
        rules.write_text(RULES.read_text().replace("10.244.7.0/24", f"{BOT_IP}/32"))
        _run("ip", "netns", "exec", agent, "nft", "-f", str(rules))
        _run("ip", "netns", "exec", agent, "nft", "-f", str(rules))  # reloading is safe
        yield agent, peer
    finally:
        _run("ip", "netns", "del", agent, check=False)
        _run("ip", "netns", "del", peer, check=False)


SERVER = textwrap.dedent("""
    import socket, sys, threading, time
    for port in (8470, 8471):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("0.0.0.0", port))
        s.listen(1024)
        threading.Thread(target=lambda s=s: [s.accept() for _ in range(1000)],
                         daemon=True).start()
    print("listening", flush=True)
    time.sleep(float(sys.argv[1]))
""")

CLIENT = textwrap.dedent("""
    import json, socket, sys
    agent, bot, other = sys.argv[1:4]
    def connect(src, port, keep):
        s = socket.socket()
        s.bind((src, 0))
        s.settimeout(2)
        try:
            s.connect((agent, port))
            keep.append(s)
            return "ok"
        except OSError as e:
            return type(e).__name__
    keep = []
    result = {"bot": connect(bot, 8470, keep), "other": connect(other, 8470, keep),
              "other_port": connect(other, 8471, keep)}
    many = [connect(bot, 8470, keep) for _ in range(140)]
    result["bot_ok"] = 1 + many.count("ok")
    result["bot_refused"] = many.count("ConnectionRefusedError")
    print(json.dumps(result))
""")


def test_only_the_bot_reaches_the_agent_port_and_its_connections_are_capped(
        namespaces: tuple[str, str]) -> None:
    import json

    agent, peer = namespaces
    server = subprocess.Popen(["ip", "netns", "exec", agent, sys.executable, "-c", SERVER,
                               "30"], stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None and server.stdout.readline().strip() == "listening"
        out = _run("ip", "netns", "exec", peer, sys.executable, "-c", CLIENT, AGENT_IP, BOT_IP,
                   OTHER_IP)
        result = json.loads(out.stdout)
    finally:
        server.terminate()
        server.wait(10)
    assert result["bot"] == "ok"
    assert result["other"] == "TimeoutError"      # dropped, not answered
    assert result["other_port"] == "ok"           # NCCL and rendezvous ports are untouched
    assert result["bot_ok"] == 128 and result["bot_refused"] == 13
