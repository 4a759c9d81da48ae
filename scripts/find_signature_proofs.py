"""Find where the line a signature matches is printed: a developer tool for writing `proof`s.

For every signature without a true positive in the corpus, take the literal runs of its
pattern (longest first) and look for them in the fetched sources: NVIDIA/nccl at its release
tags (newest first), the installed torch (its Python files, then the strings of its libraries),
then every other snapshot in the mirror at its head. Prints candidate `proof` entries (a pinned
URL with `#L<line>` and the source line) for a person to check and copy into the card; it
writes nothing.

    python scripts/find_signature_proofs.py [--all] [--card ID]
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bot.answering.knowledge import bundled_cards, bundled_incidents  # noqa: E402
from bot.knowledge.cards import healthy_logs  # noqa: E402
from bot.knowledge.signatures import measure  # noqa: E402
from scripts.verify_quotes import MIRROR, _site_packages, library_strings  # noqa: E402

META = re.compile(r"\\[dDsSwWbB]|\\.|\[[^\]]*\]|\([^()]*\)[?*+]?|[.^$|?*+(){}]")


def literals(pattern: str) -> list[str]:
    """The literal runs of a regex, longest first (escapes undone)."""
    runs, cur, i = [], "", 0
    while i < len(pattern):
        m = META.match(pattern, i)
        if m is None:
            cur += pattern[i]
            i += 1
            continue
        tok = m.group(0)
        if len(tok) == 2 and tok[0] == "\\" and not tok[1].isalnum():
            cur += tok[1]
        else:
            if tok.endswith(("?", "*")) and cur:
                cur = cur[:-1] if len(tok) == 1 else cur
            runs.append(cur)
            cur = ""
        i = m.end()
    runs.append(cur)
    return sorted({r.strip() for r in runs if len(r.strip()) >= 10}, key=len, reverse=True)


def _git(git: Path, *args: str) -> str:
    run = subprocess.run(["git", f"--git-dir={git}", *args], capture_output=True, text=True,
                         errors="replace", check=False)
    return run.stdout if run.returncode == 0 else ""


def nccl_tags(git: Path) -> list[str]:
    tags = _git(git, "tag", "--sort=-v:refname").split()
    return [t for t in tags if re.fullmatch(r"v2\.\d+\.\d+-1", t)]


def search(lit: str, tags: list[str], torch_files: list[Path]) -> str | None:
    nccl = MIRROR / "NVIDIA+nccl" / "repo"
    for tag in tags[::4] + tags[-8:]:
        hit = _git(nccl, "grep", "-n", "-F", lit, tag, "--", "src").splitlines()
        if hit:
            _, path, line, text = hit[0].split(":", 3)
            return (f"https://github.com/NVIDIA/nccl/blob/{tag}/{path}#L{line}\n"
                    f"        quote: {text.strip()!r}")
    site = _site_packages()
    if site is not None:
        import torch

        sha = torch.version.git_version
        for f in torch_files:
            text = f.read_text(encoding="utf-8", errors="replace")
            at = text.find(lit)
            if at >= 0:
                line = text.count("\n", 0, at) + 1
                src = text.splitlines()[line - 1].strip()
                rel = f.relative_to(site)
                return (f"https://github.com/pytorch/pytorch/blob/{sha}/{rel}#L{line}\n"
                        f"        quote: {src!r}")
    for repo in sorted(MIRROR.glob("*/repo")):
        if repo.parent.name == "NVIDIA+nccl":
            continue
        git = repo / ".git" if (repo / ".git").is_dir() else repo
        hit = _git(git, "grep", "-n", "-I", "-F", lit, "HEAD").splitlines()
        if hit:
            _, path, line, text = hit[0].split(":", 3)
            owner, name = repo.parent.name.split("+", 1)
            head = _git(git, "rev-parse", "HEAD").strip()
            return (f"https://github.com/{owner}/{name}/blob/{head}/{path}#L{line}\n"
                    f"        quote: {text.strip()[:300]!r}")
    return None


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--all", action="store_true", help="also signatures with a true positive")
    ap.add_argument("--card")
    args = ap.parse_args()
    cards = [c for c in bundled_cards() if args.card in (None, c.id)]
    stats = {(s.card, s.name): s for s in measure(cards, bundled_incidents(), healthy_logs())}
    nccl = MIRROR / "NVIDIA+nccl" / "repo"
    tags = nccl_tags(nccl)
    site = _site_packages()
    torch_files = sorted((site / "torch").rglob("*.py")) if site else []
    strings = library_strings()
    for card in cards:
        for sig in card.signatures:
            st = stats[(card.id, sig.name)]
            if (st.true_pos or sig.proof) and not args.all:
                continue
            found = None
            for lit in literals(sig.pattern)[:3]:
                found = search(lit, tags, torch_files)
                if found:
                    break
                if strings and lit in strings:
                    found = f"(in the torch {torch_version()} libraries) {lit!r}"
                    break
            missing = "NOT FOUND " + repr(literals(sig.pattern)[:2])
            print(f"{card.id} / {sig.name}: {found or missing}")
    return 0


def torch_version() -> str:
    import torch

    return str(torch.__version__)


if __name__ == "__main__":
    raise SystemExit(main())
