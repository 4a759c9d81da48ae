"""Where each node tool's parameter names appear outside its own folder (issue 28).

    python scripts/tool_param_grep.py [ROOT]     # ROOT: a checkout (default: this one)

For every tool in `tools.registry.TOOLS`, the multi-word field names of its parameter model
(single words such as `file` or `job` are too common to count) are looked for as whole words
in ROOT's bot/ and tools/ Python files outside tools/<tool>/; also the literal "quick" (the
probe's default preset). Prints one line per name with the files it is found in.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from tools.registry import TOOLS


def main() -> None:
    root = Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    files = [p for d in ("bot", "tools") for p in (root / d).rglob("*.py")]
    texts = {p: p.read_text(encoding="utf-8", errors="replace") for p in files}
    total = 0
    for name, spec in TOOLS.items():
        own = root / "tools" / name
        for field in spec.params.model_fields:
            if "_" not in field:
                continue
            rx = re.compile(rf"\b{re.escape(field)}\b")
            hits = {str(p.relative_to(root)): len(rx.findall(t)) for p, t in texts.items()
                    if own not in p.parents and rx.search(t)}
            total += sum(hits.values())
            print(f"{name:6} {field:20} {sum(hits.values()):3}  {', '.join(sorted(hits))}")
    quick = {str(p.relative_to(root)): t.count('"quick"') for p, t in texts.items()
             if '"quick"' in t}
    print(f"preset literal \"quick\": {sum(quick.values())}  {', '.join(sorted(quick))}")
    print(f"total outside the tools' folders: {total}")


if __name__ == "__main__":
    main()
