"""The Dockerfiles, linted for the basics: non-root USER, pinned bases, no secrets in
ENV/ARG, a HEALTHCHECK."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.deploy.conftest import DOCKER, ROOT

DOCKERFILES = sorted(DOCKER.glob("*Dockerfile"))
SECRET_WORDS = re.compile(r"TOKEN|SECRET|PASSWORD|PASSWD|API_KEY|PRIVATE_KEY", re.I)


def instructions(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuations joined and comments dropped."""
    out: list[tuple[str, str]] = []
    buf = ""
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or (line.startswith("#") and not buf):
            continue
        if line.startswith("#"):
            continue
        if line.endswith("\\"):
            buf += line[:-1] + " "
            continue
        buf += line
        word, _, rest = buf.partition(" ")
        out.append((word.upper(), rest.strip()))
        buf = ""
    return out


def arg_defaults(ins: list[tuple[str, str]]) -> dict[str, str]:
    out = {}
    for word, rest in ins:
        if word == "ARG" and "=" in rest:
            k, _, v = rest.partition("=")
            out[k.strip()] = v.strip().strip('"')
    return out


def test_both_images_present():
    names = {p.name for p in DOCKERFILES}
    assert {"bot.Dockerfile", "agent.Dockerfile"} <= names


@pytest.mark.parametrize("path", DOCKERFILES, ids=lambda p: p.name)
def test_final_user_is_not_root(path):
    users = [rest for word, rest in instructions(path) if word == "USER"]
    assert users, "no USER instruction"
    user = users[-1].split(":")[0]
    assert user not in {"root", "0", ""}


@pytest.mark.parametrize("path", DOCKERFILES, ids=lambda p: p.name)
def test_base_images_pinned(path):
    ins = instructions(path)
    args = arg_defaults(ins)
    stages = set()
    for word, rest in ins:
        if word != "FROM":
            continue
        parts = rest.split()
        image = parts[0]
        image = re.sub(r"\$\{?(\w+)\}?", lambda m: args.get(m.group(1), m.group(0)), image)
        if image in stages:
            continue
        if len(parts) >= 3 and parts[1].upper() == "AS":
            stages.add(parts[2])
        assert "$" not in image, f"unresolved base image {image}"
        if "@sha256:" in image:
            continue
        tag = image.rsplit("/", 1)[-1].partition(":")[2]
        assert tag and tag != "latest", f"{image}: no exact tag"
        assert re.search(r"\d+\.\d+", tag), f"{image}: tag is not an exact version"


@pytest.mark.parametrize("path", DOCKERFILES, ids=lambda p: p.name)
def test_no_secrets_in_env_or_arg(path):
    for word, rest in instructions(path):
        if word not in {"ENV", "ARG"}:
            continue
        for pair in re.findall(r"([A-Za-z_][A-Za-z0-9_]*)(?:=(\"[^\"]*\"|\S*))?", rest):
            key, value = pair
            assert not (SECRET_WORDS.search(key) and value), f"{word} {key} has a value"


@pytest.mark.parametrize("path", DOCKERFILES, ids=lambda p: p.name)
def test_healthcheck_present(path):
    checks = [rest for word, rest in instructions(path) if word == "HEALTHCHECK"]
    assert checks and "NONE" not in checks[-1].upper()
    for name in re.findall(r"/opt/ncclbot/([\w-]+\.py)", checks[-1]):
        assert (DOCKER / name).is_file(), name


@pytest.mark.parametrize("path", DOCKERFILES, ids=lambda p: p.name)
def test_copied_sources_exist(path):
    for word, rest in instructions(path):
        if word != "COPY" or "--from=" in rest:
            continue
        for src in rest.split()[:-1]:
            if not src.startswith("--"):
                assert (ROOT / src).exists(), f"COPY {src}"


def test_bot_image_has_no_cuda_or_torch_and_builds_index():
    ins = instructions(DOCKER / "bot.Dockerfile")
    froms = " ".join(rest for word, rest in ins if word in {"FROM", "ARG"})
    assert "cuda" not in froms.lower()
    runs = " ".join(rest for word, rest in ins if word == "RUN")
    assert "ncclbot index --rebuild" in runs
    assert "torch==" not in runs


def test_agent_image_on_pinned_cuda_runtime_with_torch():
    ins = instructions(DOCKER / "agent.Dockerfile")
    args = arg_defaults(ins)
    assert re.fullmatch(r"nvidia/cuda:12\.\d+\.\d+-runtime-ubuntu22\.04", args["CUDA_IMAGE"])
    assert re.fullmatch(r"2\.\d+\.\d+", args["TORCH_VERSION"])
    assert any(word == "EXPOSE" and "8470" in rest for word, rest in ins)


def test_dockerignore_keeps_secrets_and_venv_out():
    lines = (ROOT / ".dockerignore").read_text(encoding="utf-8").split()
    assert {".git", ".venv", ".env"} <= set(lines)


def test_bot_healthcheck_queries_the_bots_health_endpoint():
    """The image's HEALTHCHECK asks the bot's /healthz (its real state) in both modes."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("healthcheck", DOCKER / "healthcheck.py")
    hc = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hc)
    assert hc.http_port(["ncclbot", "serve", "slack", "--http", "--port", "8080"]) == 8080
    assert hc.http_port(["ncclbot", "serve", "slack", "--http"]) == 3000
    assert hc.http_port(["ncclbot", "serve", "slack"]) == 3000  # Socket Mode's health port
    assert hc.http_port(["ncclbot", "serve", "slack", "--health-port=9000"]) == 9000
    assert hc.http_port(["ncclbot", "serve", "slack", "--health-port", "0"]) is None
