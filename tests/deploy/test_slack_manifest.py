"""deploy/slack/manifest.yaml asks for exactly the bot scopes the code in bot/slack uses.

Scopes are derived from the Slack Web API methods called in bot/slack/**/*.py
(`client.chat_postMessage(...)`, `api_call("chat.postMessage")`, `say(...)`), the
events the app listens to (`app.event("app_mention")`) together with the manifest's
event subscriptions, and slash commands. A method missing from METHOD_SCOPES fails the
test: add it with its required bot scope (https://api.slack.com/methods).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from tests.deploy.conftest import DEPLOY, ROOT

SLACK_CODE = ROOT / "bot" / "slack"
MANIFEST = DEPLOY / "slack" / "manifest.yaml"

# Web API method -> bot scopes it needs (an empty set: none).
METHOD_SCOPES: dict[str, set[str]] = {
    "auth.test": set(),
    "chat.postMessage": {"chat:write"},
    "chat.update": {"chat:write"},
    "chat.delete": {"chat:write"},
    "chat.postEphemeral": {"chat:write"},
    "chat.getPermalink": set(),
    "files.info": {"files:read"},
    "files.upload": {"files:write"},
    "files.upload.v2": {"files:write"},
    "files.getUploadURLExternal": {"files:write"},
    "files.completeUploadExternal": {"files:write"},
    "usergroups.users.list": {"usergroups:read"},
    "usergroups.list": {"usergroups:read"},
    "reactions.add": {"reactions:write"},
    "reactions.remove": {"reactions:write"},
    "reactions.get": {"reactions:read"},
    "users.info": {"users:read"},
    "users.lookupByEmail": {"users:read", "users:read.email"},
    "conversations.replies": {"channels:history"},
    "conversations.history": {"channels:history"},
    "conversations.info": {"channels:read"},
    "conversations.open": {"im:write"},
    "views.open": set(),
    "views.update": set(),
    "views.push": set(),
    "views.publish": set(),
}

# Manifest bot event -> bot scope it needs.
EVENT_SCOPES: dict[str, set[str]] = {
    "app_mention": {"app_mentions:read"},
    "message.im": {"im:history"},
    "message.channels": {"channels:history"},
    "message.groups": {"groups:history"},
    "message.mpim": {"mpim:history"},
    "reaction_added": {"reactions:read"},
    "reaction_removed": {"reactions:read"},
    "app_home_opened": set(),
}

SLACK_FAMILIES = (
    "admin|api|apps|auth|bookmarks|bots|calls|canvases|chat|conversations|dialog|dnd|emoji|"
    "files|functions|pins|reactions|reminders|search|stars|team|usergroups|users|views|"
    "workflows"
)
SDK_CALL = re.compile(rf"\bclient\.((?:{SLACK_FAMILIES})_[A-Za-z0-9_]+)\s*\(")
API_CALL = re.compile(r"\bapi_call\(\s*[\"']([\w.]+)[\"']")
SAY_CALL = re.compile(r"(?<![\w.])say\s*\(")
EVENT_REG = re.compile(r"\.event\(\s*[\"']([\w.]+)[\"']")
MESSAGE_REG = re.compile(r"\bapp\.message\(")
COMMAND_REG = re.compile(r"\.command\(\s*[\"'](/[\w-]+)[\"']")


def sources() -> list[tuple[Path, str]]:
    return [(p, p.read_text(encoding="utf-8")) for p in sorted(SLACK_CODE.rglob("*.py"))]


def sdk_to_method(name: str) -> str:
    # chat_postMessage -> chat.postMessage; usergroups_users_list -> usergroups.users.list
    return name.replace("_", ".")


def methods_used() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for path, text in sources():
        where = str(path.relative_to(ROOT))
        for m in SDK_CALL.finditer(text):
            found.setdefault(sdk_to_method(m.group(1)), []).append(where)
        for m in API_CALL.finditer(text):
            found.setdefault(m.group(1), []).append(where)
        if SAY_CALL.search(text):
            found.setdefault("chat.postMessage", []).append(where)
    return found


def events_handled() -> set[str]:
    out: set[str] = set()
    for _, text in sources():
        out |= set(EVENT_REG.findall(text))
        if MESSAGE_REG.search(text):
            out.add("message")
    return out


def commands_handled() -> set[str]:
    return {c for _, text in sources() for c in COMMAND_REG.findall(text)}


def uses_private_file_urls() -> bool:
    return any("url_private" in text for _, text in sources())


@pytest.fixture(scope="module")
def manifest() -> dict:
    if not SLACK_CODE.is_dir() or not any(SLACK_CODE.rglob("*.py")):
        pytest.skip("bot/slack does not exist yet: nothing to compare the manifest with")
    if not MANIFEST.is_file():
        pytest.skip("deploy/slack/manifest.yaml does not exist yet")
    return yaml.safe_load(MANIFEST.read_text(encoding="utf-8"))


def manifest_bot_scopes(manifest: dict) -> set[str]:
    return set(((manifest.get("oauth_config") or {}).get("scopes") or {}).get("bot") or [])


def manifest_bot_events(manifest: dict) -> set[str]:
    settings = manifest.get("settings") or {}
    return set((settings.get("event_subscriptions") or {}).get("bot_events") or [])


def test_every_called_method_is_known(manifest):
    unknown = {m: w for m, w in methods_used().items() if m not in METHOD_SCOPES}
    assert not unknown, (
        f"Slack methods without a scope entry in METHOD_SCOPES: {unknown}; add them")


def test_subscribed_events_match_listeners(manifest):
    handled = events_handled()
    subscribed = manifest_bot_events(manifest)
    unknown = subscribed - set(EVENT_SCOPES)
    assert not unknown, f"manifest events without an entry in EVENT_SCOPES: {unknown}"
    unhandled = {e for e in subscribed if e.split(".")[0] not in handled}
    assert not unhandled, f"manifest subscribes to events no listener handles: {unhandled}"
    missing = {e for e in handled if not any(s.split(".")[0] == e for s in subscribed)}
    assert not missing, f"listeners for events the manifest does not subscribe to: {missing}"


def test_slash_commands_match(manifest):
    declared = {c.get("command") for c in (manifest.get("features") or {}).get(
        "slash_commands") or []}
    assert commands_handled() == declared


def test_bot_scopes_are_exactly_what_the_code_uses(manifest):
    required: dict[str, str] = {}
    for method, where in methods_used().items():
        for scope in METHOD_SCOPES.get(method, set()):
            required.setdefault(scope, f"{method} ({where[0]})")
    for event in manifest_bot_events(manifest):
        for scope in EVENT_SCOPES.get(event, set()):
            required.setdefault(scope, f"event {event}")
    if commands_handled():
        required.setdefault("commands", "slash command listener")
    if uses_private_file_urls():
        required.setdefault("files:read", "downloads url_private files")
    declared = manifest_bot_scopes(manifest)
    missing = {s: why for s, why in required.items() if s not in declared}
    extra = declared - set(required)
    assert not missing, f"scopes the code needs but the manifest lacks: {missing}"
    assert not extra, f"scopes in the manifest that no code uses: {sorted(extra)}"


INTERACTIVE_REG = re.compile(r"\bapp\.(action|view|shortcut|options|block_action|"
                             r"view_submission|view_closed|block_suggestion)\(")
BLOCKS = SLACK_CODE / "blocks.py"


def interactive_listeners() -> set[str]:
    return {m.group(1) for _, text in sources() for m in INTERACTIVE_REG.finditer(text)}


def test_interactivity_matches_listeners(manifest):
    """Buttons and modals reach the app only when interactivity is on (and, over HTTP, sent
    to the same /slack/events URL as events); the manifest enables it only if used."""
    kinds = interactive_listeners()
    interactivity = (manifest.get("settings") or {}).get("interactivity") or {}
    assert bool(interactivity.get("is_enabled")) == bool(kinds), (
        f"interactive listeners {sorted(kinds)} vs interactivity {interactivity}")
    if kinds and not (manifest.get("settings") or {}).get("socket_mode_enabled"):
        events_url = manifest["settings"]["event_subscriptions"]["request_url"]
        assert interactivity.get("request_url") == events_url


def test_every_button_and_modal_has_a_listener(manifest):
    """Each action_id / callback_id the app renders (ACTION_* / VIEW_* in blocks.py) is
    registered with app.action / app.view, and every registered one is rendered."""
    consts = dict(re.findall(r"^((?:ACTION|VIEW)_\w+) = \"(\w+)\"", BLOCKS.read_text(),
                             re.MULTILINE))
    assert consts, "no ACTION_*/VIEW_* constants in bot/slack/blocks.py"
    registered = {m.group(2) for _, text in sources()
                  for m in re.finditer(r"\bapp\.(action|view)\((?:re\.compile\(f?\"\^?\{?)?"
                                       r"blocks\.((?:ACTION|VIEW)_\w+)", text)}
    assert registered == set(consts), (
        f"rendered but unhandled: {set(consts) - registered}; "
        f"handled but never rendered: {registered - set(consts)}")
