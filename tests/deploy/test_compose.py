"""deploy/compose.yaml parses and points only at files that exist."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tests.deploy.conftest import DEPLOY, ROOT

COMPOSE = DEPLOY / "compose.yaml"


def load() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))


def services() -> dict[str, dict[str, Any]]:
    return load()["services"]


def as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


def test_parses_with_expected_services():
    svc = services()
    assert {"bot", "chroma", "agent"} <= set(svc)
    assert "agent" in svc["agent"]["profiles"]


def test_build_contexts_and_dockerfiles_exist():
    built = 0
    for name, s in services().items():
        build = s.get("build")
        if build is None:
            continue
        built += 1
        if isinstance(build, str):
            build = {"context": build}
        context = (COMPOSE.parent / build["context"]).resolve()
        assert context.is_dir(), f"{name}: build context {context}"
        dockerfile = context / build.get("dockerfile", "Dockerfile")
        assert dockerfile.is_file(), f"{name}: {dockerfile}"
    assert built >= 2


def test_env_files_have_examples():
    for name, s in services().items():
        for entry in as_list(s.get("env_file")):
            path = entry["path"] if isinstance(entry, dict) else entry
            target = COMPOSE.parent / path
            example = target.with_name(target.name + ".example")
            assert target.is_file() or example.is_file(), f"{name}: {path} (or .example)"


def test_bind_mounts_exist():
    for name, s in services().items():
        for vol in as_list(s.get("volumes")):
            source = vol.get("source") if isinstance(vol, dict) else vol.split(":", 1)[0]
            if source and source.startswith((".", "/")):
                assert (COMPOSE.parent / source).exists(), f"{name}: mount {source}"


def test_named_volumes_declared():
    data = load()
    declared = set(data.get("volumes") or {})
    for name, s in data["services"].items():
        for vol in as_list(s.get("volumes")):
            source = vol.get("source") if isinstance(vol, dict) else vol.split(":", 1)[0]
            if source and not source.startswith((".", "/", "~")):
                assert source in declared, f"{name}: volume {source} not declared"


def test_images_pinned():
    for name, s in services().items():
        image = s.get("image")
        assert image, f"{name}: no image name"
        tag = image.rsplit("/", 1)[-1].partition(":")[2]
        assert tag and tag != "latest", f"{name}: {image} is not pinned"


def test_bot_state_on_a_volume_and_secrets_from_env_file():
    bot = services()["bot"]
    assert as_list(bot.get("env_file")), "bot secrets come from an env file"
    env = bot.get("environment") or {}
    for key in env:
        assert not any(w in key for w in ("TOKEN", "SECRET", "PASSWORD", "API_KEY")), key
    mounts = {v.split(":")[1] for v in bot["volumes"] if isinstance(v, str)}
    sqlite_dir = str(Path(env["NCCLBOT_SQLITE_PATH"]).parent)
    assert sqlite_dir in mounts
    assert env["NCCLBOT_NODES_FILE"] in mounts


def test_agent_gets_gpus_only_in_its_profile():
    svc = services()
    devices = svc["agent"]["deploy"]["resources"]["reservations"]["devices"]
    assert any("gpu" in d.get("capabilities", []) for d in devices)
    for name, s in svc.items():
        if name != "agent":
            assert "deploy" not in s, name


def test_env_example_has_only_placeholders():
    text = (DEPLOY / ".env.example").read_text(encoding="utf-8")
    names = set()
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        key, _, value = line.partition("=")
        names.add(key)
        if any(w in key for w in ("TOKEN", "SECRET", "API_KEY", "PASSWORD")):
            assert "REPLACE-ME" in value, f"{key} must be a placeholder"
    assert {"SLACK_BOT_TOKEN", "SLACK_APP_TOKEN", "SLACK_SIGNING_SECRET",
            "NCCLBOT_AGENT_SECRET"} <= names
    assert not (ROOT / "deploy" / ".env").exists() or ".env" in (
        ROOT / ".dockerignore").read_text(encoding="utf-8")


def test_trial_inventory_scheme_matches_the_agent():
    """nodes.compose.yaml points at the `agent` service with the scheme it serves."""
    svc = services()
    inventory = yaml.safe_load((DEPLOY / "nodes.compose.yaml").read_text(encoding="utf-8"))
    env = svc["agent"].get("environment") or {}
    names = set(env) if isinstance(env, dict) else {e.split("=", 1)[0] for e in env}
    tls = {"NCCLBOT_AGENT_TLS_CERT", "NCCLBOT_AGENT_TLS_KEY"} <= names
    for name, node in inventory["nodes"].items():
        assert node["url"].startswith("https://" if tls else "http://"), name
        assert node["url"].split("://", 1)[1].startswith("agent:"), name
