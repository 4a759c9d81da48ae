"""Requests are bound to the node they were signed for and to the agent's lifetime;
HTTPS with a certificate made here (health and a signed call through the real client)."""

from __future__ import annotations

import json
import shutil
import ssl
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from bot.config import load_settings
from bot.nodes.client import client_for
from bot.nodes.inventory import Node
from tests.agent.conftest import LOOPBACK, SECRET, serve_inprocess, spawn_agent, stop_agent
from tools.agent.auth import signed_headers
from tools.agent.guard import TargetCheck


def _signed_env(target: str, now: float | None = None) -> tuple[bytes, dict[str, str]]:
    payload = json.dumps({"import_torch": False}).encode()
    h = signed_headers(SECRET.encode(), "POST", target, "/v1/env", payload, "slack:U1", now=now)
    return payload, {**h, "Content-Type": "application/json"}


def test_request_signed_for_node_a_is_refused_by_node_b(tmp_path: Path) -> None:
    with serve_inprocess(tmp_path, "node-a") as a, serve_inprocess(tmp_path, "node-b") as b:
        payload, h = _signed_env(a.target)
        # replayed verbatim to B, Host header and all: the signature is good, the target not
        r = httpx.post(b.url + "/v1/env", content=payload, headers={**h, "Host": a.target})
        assert r.status_code == 401, r.text
        assert "signed for" in r.json()["detail"] and a.target in r.json()["detail"]
        # sent to B under B's own Host: the signature does not cover it
        r = httpx.post(b.url + "/v1/env", content=payload, headers=h)
        assert r.status_code == 401 and "bad signature" in r.json()["detail"]
        # the same request where it was meant to go is fine
        r = httpx.post(a.url + "/v1/env", content=payload, headers=h)
        assert r.status_code == 200 and r.json()["tool"] == "env"
        denied = [json.loads(x) for x in b.audit_lines() if "/v1/env" in x]
        assert [d["decision"] for d in denied] == ["deny", "deny"]


def test_request_signed_before_the_agent_started_is_refused(tmp_path: Path) -> None:
    with serve_inprocess(tmp_path) as a:
        payload, old = _signed_env(a.target, now=time.time() - 60)  # inside the 5-min window
        r = httpx.post(a.url + "/v1/env", content=payload, headers=old)
        assert r.status_code == 401 and "before this agent started" in r.json()["detail"]
        payload, fresh = _signed_env(a.target)
        assert httpx.post(a.url + "/v1/env", content=payload, headers=fresh).status_code == 200


def test_old_signature_scheme_is_named(tmp_path: Path) -> None:
    with serve_inprocess(tmp_path) as a:
        payload, h = _signed_env(a.target)
        h["X-Ncclbot-Signature"] = "v1=" + h["X-Ncclbot-Signature"][3:]
        r = httpx.post(a.url + "/v1/env", content=payload, headers=h)
        assert r.status_code == 401 and "unsupported signature scheme" in r.json()["detail"]


def test_target_check() -> None:
    check = TargetCheck(names=["gpu-node-17", "proxy.example:443"], hostnames=["vm"])
    server = ("10.0.0.17", 8470)
    assert check("10.0.0.17:8470", server, "http")
    assert check("VM:8470", server, "http")
    assert check("gpu-node-17:1234", server, "http")  # a configured name, any port
    assert check("proxy.example:443", server, "https")
    assert not check("10.0.0.18:8470", server, "http")  # another node
    assert not check("10.0.0.17:8471", server, "http")  # another agent on this host
    assert not check("10.0.0.17", server, "http")  # port 80 implied
    assert not check("localhost:8470", server, "http")  # not a loopback connection
    assert check("localhost:8470", ("127.0.0.1", 8470), "http")
    assert check("[::1]:8470", ("::1", 8470), "http")
    assert not check("", server, "http") and not check("x:notaport", server, "http")
    assert not check("10.0.0.17:8470", None, "http")


def _self_signed(tmp: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and its key: `cryptography` if installed, else openssl."""
    cert, key = tmp / "agent.crt", tmp / "agent.key"
    try:
        import datetime
        import ipaddress

        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID
    except ImportError:
        openssl = shutil.which("openssl")
        if openssl is None:
            pytest.skip("needs the `cryptography` package or the openssl command to make a "
                        "test certificate")
        subprocess.run([openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt",
                        "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1",
                        "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                        "-keyout", str(key), "-out", str(cert)],
                       check=True, capture_output=True, timeout=60)
        return cert, key
    pkey = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, LOOPBACK)])
    now = datetime.datetime.now(datetime.timezone.utc)
    built = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
             .public_key(pkey.public_key()).serial_number(x509.random_serial_number())
             .not_valid_before(now - datetime.timedelta(minutes=5))
             .not_valid_after(now + datetime.timedelta(days=1))
             .add_extension(x509.SubjectAlternativeName(
                 [x509.IPAddress(ipaddress.ip_address(LOOPBACK))]), critical=False)
             .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
             .sign(pkey, hashes.SHA256()))
    cert.write_bytes(built.public_bytes(serialization.Encoding.PEM))
    key.write_bytes(pkey.private_bytes(serialization.Encoding.PEM,
                                       serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()))
    return cert, key


def test_https_health_and_signed_call(tmp_path: Path) -> None:
    cert, key = _self_signed(tmp_path)
    agent = spawn_agent(tmp_path, "tls-node", {"NCCLBOT_AGENT_TLS_CERT": str(cert),
                                               "NCCLBOT_AGENT_TLS_KEY": str(key)})
    url = agent.url.replace("http://", "https://")
    trust = ssl.create_default_context(cafile=str(cert))
    try:
        deadline = time.monotonic() + 120  # generous: a busy machine
        while True:
            try:
                health = httpx.get(url + "/health", verify=trust, timeout=1)
                break
            except httpx.TransportError:
                assert agent.proc is not None and agent.proc.poll() is None, "agent died"
                assert time.monotonic() < deadline, "TLS agent did not come up"
                time.sleep(0.1)
        assert health.json() == {"status": "ok"}
        with pytest.raises(httpx.ConnectError):  # not trusted without the CA file
            httpx.get(url + "/health", timeout=2)
        settings = load_settings(agent_secret=SECRET, agent_ca_file=cert)
        with client_for(settings, Node(name="tls-node", url=url), "slack:U1") as c:
            assert c.health() == {"status": "ok"}
            result = c.run("env", {"import_torch": False})
        assert result.tool == "env" and result.status == "success"
    finally:
        stop_agent(agent)
