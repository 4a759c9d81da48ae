"""The PostgreSQL password is never printed: not in the startup line, not in an error, in
any URL form (`user:pw@`, libpq's `?password=`, keywords, malformed URLs); a malformed
URL is a one-line error. The bot and the CLI run as real processes against the session's
throwaway PostgreSQL (trust authentication: any password is accepted)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bot.state.db import redact_url, scrub_url_secrets, url_passwords

PW = "Pg5ecretPlanted"


@pytest.mark.parametrize(("url", "shown"), [
    (f"postgresql://app:{PW}@db:5432/runs", "postgresql://app:***@db:5432/runs"),
    (f"postgresql://app@db/runs?sslmode=require&password={PW}",
     "postgresql://app@db/runs?sslmode=require&password=***"),
    (f"postgresql://app@db/runs?password={PW}&sslmode=require",
     "postgresql://app@db/runs?password=***&sslmode=require"),
    (f"host=db user=app password={PW} dbname=runs", "host=db user=app password=*** dbname=runs"),
    (f"host=db password='{PW} x y' dbname=runs", "host=db password=*** dbname=runs"),
    (f"postgresql://app:{PW}@[::1/runs", "postgresql://app:***@[::1/runs"),
    (f"postgresql://app:{PW}@db:notaport/runs", "postgresql://app:***@db:notaport/runs"),
    (f"postgresql://app:p@ss/{PW}@db/runs", "postgresql://app:***@db/runs"),
    ("postgresql://app@db/runs", "postgresql://app@db/runs"),
])
def test_redact_url_every_form(url: str, shown: str) -> None:
    assert redact_url(url) == shown
    assert PW not in redact_url(url)


def test_a_driver_message_quoting_the_url_loses_the_password() -> None:
    url = f"postgresql://app:{PW}@[::1/runs"
    message = f'end of string reached when looking for matching "]" in URI: "{url}"'
    assert PW not in scrub_url_secrets(message, url)
    assert PW in url_passwords(f"postgresql://app@db/runs?password={PW}")
    percent = "postgresql://app:a%2Fb%40cdef@db/runs"
    assert "a%2Fb%40cdef" not in scrub_url_secrets(f"failed for {percent}", percent)


def _env(tmp_path: Path, url: str) -> dict[str, str]:
    root = Path(__file__).resolve().parents[2]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NCCLBOT_", "SLACK_"))}
    env.update(PYTHONPATH=str(root), NCCLBOT_DATABASE_URL=url,
               NCCLBOT_DATA_DIR=str(tmp_path / "data"),
               NCCLBOT_INDEX_DIR=os.environ.get("NCCLBOT_INDEX_DIR", str(tmp_path / "index")),
               HF_HUB_OFFLINE="1")
    return env


def _ncclbot(*args: str) -> list[str]:
    return [sys.executable, "-c", "from bot.cli.main import main; main()", *args]


def _forms(server_url: str) -> list[str]:
    """The session server's URL with the planted password in every form libpq reads."""
    rest = server_url.split("://", 1)[1]  # ncclbot@127.0.0.1:PORT/postgres
    user, hostpart = rest.split("@", 1)
    host, _, tail = hostpart.partition(":")
    port, _, db = tail.partition("/")
    return [f"postgresql://{user}:{PW}@{hostpart}",
            f"postgresql://{user}@{hostpart}?password={PW}",
            f"postgresql://{user}@{hostpart}?sslmode=disable&password={PW}",
            f"postgres://{user}:{PW}@{host}:{port}/{db}?application_name=ncclbot"]


@pytest.mark.parametrize("form", range(4))
def test_the_startup_line_hides_the_password(postgres_server: str, tmp_path: Path,
                                             form: int) -> None:
    """`ncclbot serve slack --http` logs which state database it uses: with the password
    hidden, whichever form the URL has."""
    from tests.slack.fake_slack import BOT_TOKEN, FakeSlack

    url = _forms(postgres_server)[form]
    with FakeSlack() as slack:
        env = {**_env(tmp_path, url), "SLACK_BOT_TOKEN": BOT_TOKEN,
               "SLACK_SIGNING_SECRET": "s" * 32, "NCCLBOT_SLACK_API_URL": slack.api_url}
        proc = subprocess.Popen(_ncclbot("serve", "slack", "--http", "--port", "0",
                                         "--host", "127.0.0.1"),
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True)
        lines: list[str] = []
        try:
            deadline = time.monotonic() + 120
            assert proc.stdout is not None
            while time.monotonic() < deadline:
                line = proc.stdout.readline()
                if not line:
                    break
                lines.append(line)
                if "state database:" in line:
                    break
        finally:
            proc.terminate()
            try:
                out, _ = proc.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                out, _ = proc.communicate()
            lines.append(out or "")
    text = "".join(lines)
    assert "state database: PostgreSQL" in text, text[-2000:]
    assert PW not in text
    assert "***" in text


@pytest.mark.parametrize("url", [
    f"postgresql://app:{PW}@[::1/runs",  # malformed: libpq quotes it whole
    f"postgresql://app@127.0.0.1:1/runs?password={PW}",  # refused
    f"postgresql://app@127.0.0.1:1/runs?password={PW}&bogus=1",  # unknown parameter
    f"postgresql://app:{PW}@127.0.0.1:notaport/runs",
    f"postgresql://app:p@ss/{PW}@127.0.0.1:1/runs",  # an unencoded @ and / in the password
])
def test_a_bad_url_is_one_line_without_the_password(tmp_path: Path, url: str) -> None:
    run = subprocess.run(_ncclbot("feedback", "report"), env=_env(tmp_path, url),
                         capture_output=True, text=True, timeout=120)
    out = run.stdout + run.stderr
    assert run.returncode != 0
    assert PW not in out
    assert "Traceback" not in out
    errors = [line for line in out.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "cannot reach the state database" in errors[0], out
