"""Re-verify every quote of the cards against its fetched source; pin GitHub links to a commit.

A developer tool, not CI: it reads git snapshots of the cited repositories, fetched beforehand
into a mirror folder (`/work/.mirror/<owner>+<name>/repo` by default, the layout the `fetch`
tool leaves), and, for pytorch/pytorch and huggingface/transformers (too big to fetch), the
installed wheels whose version it names (torch records its commit; a transformers wheel is its
release tag). Every quote (a basis of a claim, a signature's `proof`) is classified:

- verified: the quote stands in the file at the pinned commit or tag (whitespace and the
  inline markup of Markdown/RST ignored; `...` / `…` join parts that must appear in order);
- changed: the file is there, the quote is not (it moved, or the text was edited);
- not checkable: the source is not a file of a fetched repository (an issue thread, a web page).

    python scripts/verify_quotes.py                 # report -> docs/reviews/quotes-<date>.md
    python scripts/verify_quotes.py --pin           # first rewrite blob/main|master links

`--pin` rewrites each `github.com/<o>/<r>/blob/<main|master>/<path>` link of a card to the newest
commit of the snapshot where every quote the card takes from that file stands (the snapshot's
head when they all still stand there, else the newest earlier commit that has them all).
"""

from __future__ import annotations

import argparse
import datetime as dt
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bot.knowledge.cards import Card, card_files, parse_card  # noqa: E402

MIRROR = Path("/work/.mirror")
#: Branch names that do not pin a text (what `knowledge check` flags too).
BRANCHES = ("main", "master", "HEAD", "develop", "dev", "trunk")
BLOB = re.compile(r"https://github\.com/(?P<owner>[\w.-]+)/(?P<repo>[\w.-]+)/(?:blob|tree)/"
                  r"(?P<ref>[^/\s#]+)/(?P<path>[^\s#\"']+)(?:#\S*)?")
MARKUP = re.compile(r"[`*_\\]|\[|\]|\(#[^)]*\)")
ELLIPSIS = re.compile(r"\s*(?:\.\.\.|…)\s*")
#: troff (man pages): font escapes and request lines.
TROFF = re.compile(r"\\f[BIRP]|^\.[A-Za-z]{1,2}\b[^\n]*$", re.M)
MAN_PAGE = re.compile(r"\.[1-8]$")
#: How many commits touching a file `--pin` walks back to find one where its quotes stand.
MAX_HISTORY = 400


def normalize(text: str) -> str:
    """Whitespace collapsed, Markdown/RST inline markup and escapes dropped, case kept."""
    return " ".join(MARKUP.sub("", text).split())


def quote_stands(text: str, quote: str, troff: bool = False, literal_only: bool = False) -> bool:
    """The quote appears in the text (parts joined by an ellipsis appear in order). With
    `literal_only` (the text is a library's strings) only the parts of the quote inside double
    quotes must appear, anywhere; a quote without any must appear whole."""
    hay = normalize(TROFF.sub("", text) if troff else text)
    if literal_only:
        inside = [normalize(x) for x in re.findall(r'"([^"]{8,})"', quote)]
        return all(x in hay for x in inside) if inside else normalize(quote) in hay
    pos = 0
    for part in (normalize(p) for p in ELLIPSIS.split(quote)):
        if not part:
            continue
        at = hay.find(part, pos)
        if at < 0:
            return False
        pos = at + len(part)
    return True


@dataclass(frozen=True)
class Quote:
    card: str
    where: str  # root_cause / remediation[2] / signature foo
    source: str
    quote: str


@dataclass(frozen=True)
class Outcome:
    quote: Quote
    status: str  # verified / changed / not checkable
    note: str


def quotes(card: Card) -> Iterator[Quote]:
    for where, basis in card.claims():
        for b in basis:
            yield Quote(card.id, where, str(b.source), b.quote)
    for sig in card.signatures:
        for p in sig.proof:
            yield Quote(card.id, f"signature {sig.name}", str(p.source), p.quote)


def _git(repo: Path, *args: str) -> str | None:
    run = subprocess.run(["git", f"--git-dir={repo}", *args], capture_output=True, text=True,
                         errors="replace", check=False)
    return run.stdout if run.returncode == 0 else None


def _site_packages() -> Path | None:
    try:
        import torch
    except ImportError:
        return None
    return Path(torch.__file__).resolve().parent.parent


def wheel_refs() -> dict[str, list[str]]:
    """owner/repo -> the refs (commit first, then release tag) the installed wheel was built
    from."""
    out: dict[str, list[str]] = {}
    try:
        import torch

        out["pytorch/pytorch"] = [str(torch.version.git_version),
                                  "v" + str(torch.__version__).split("+", 1)[0]]
    except ImportError:
        pass
    try:
        from importlib.metadata import version

        out["huggingface/transformers"] = [f"v{version('transformers')}"]
    except Exception:  # noqa: BLE001 - not installed
        pass
    return out


def library_strings() -> str:
    """The printable strings of the installed torch libraries (C++ format strings, bound
    docstrings): where a quote from a .cpp file that the wheel does not ship is checked."""
    site = _site_packages()
    if site is None:
        return ""
    names = ("libtorch_cpu.so", "libtorch_python.so", "libtorch_cuda.so", "libc10.so")
    lib = site / "torch" / "lib"
    libs = [str(lib / n) for n in names if (lib / n).is_file()]
    if not libs:
        return ""
    run = subprocess.run(["strings", "-n", "8", *libs], capture_output=True, text=True,
                         errors="replace", check=False)
    return run.stdout


def wheel_file(repo: str, path: str) -> Path | None:
    """The installed copy of a source file of pytorch or transformers (None if not shipped)."""
    site = _site_packages()
    if site is None:
        return None
    if repo == "pytorch/pytorch":
        if path.startswith("torch/csrc/") and path.endswith((".h", ".hpp")):
            candidate = site / "torch" / "include" / path
        else:
            candidate = site / path
    elif repo == "huggingface/transformers" and path.startswith("src/"):
        candidate = site / path[len("src/"):]
    else:
        return None
    return candidate if candidate.is_file() else None


class Sources:
    """File texts at a ref: git snapshots in the mirror, installed wheels for the giants."""

    def __init__(self, mirror: Path) -> None:
        self.mirror = mirror
        self.wheels = wheel_refs()
        self._cache: dict[tuple[str, str, str], str | None] = {}
        self._strings: str | None = None

    def git_dir(self, repo: str) -> Path | None:
        base = self.mirror / repo.replace("/", "+") / "repo"
        for cand in (base / ".git", base):
            if (cand / "HEAD").is_file():
                return cand
        return None

    def text(self, repo: str, ref: str, path: str) -> str | None:
        key = (repo, ref, path)
        if key not in self._cache:
            self._cache[key] = self._read(repo, ref, path)
        return self._cache[key]

    def _read(self, repo: str, ref: str, path: str) -> str | None:
        if ref in self.wheels.get(repo, []):
            f = wheel_file(repo, path)
            if f is not None:
                return f.read_text(encoding="utf-8", errors="replace")
            if repo == "pytorch/pytorch" and path.endswith(".cpp"):
                if self._strings is None:
                    self._strings = library_strings()
                return self._strings or None
            return None
        git = self.git_dir(repo)
        if git is None:
            return None
        if ref in BRANCHES:
            ref = "HEAD"
        return _git(git, "show", f"{ref}:{path}")

    def head(self, repo: str) -> str | None:
        if repo in self.wheels:
            return self.wheels[repo][0]
        git = self.git_dir(repo)
        out = _git(git, "rev-parse", "HEAD") if git else None
        return out.strip() if out else None

    def history(self, repo: str, path: str) -> list[str]:
        git = self.git_dir(repo)
        if git is None:
            return []
        out = _git(git, "log", f"-{MAX_HISTORY}", "--format=%H", "HEAD", "--", path)
        return out.split() if out else []


def check(q: Quote, sources: Sources) -> Outcome:
    m = BLOB.fullmatch(q.source)
    if m is None:
        return Outcome(q, "not checkable", "not a file of a GitHub repository")
    repo, ref, path = f"{m['owner']}/{m['repo']}", m["ref"], m["path"]
    text = sources.text(repo, ref, path)
    if text is None:
        return Outcome(q, "not checkable", f"no snapshot of {repo} at {ref} with {path}")
    binary = repo == "pytorch/pytorch" and wheel_file(repo, path) is None
    if quote_stands(text, q.quote, troff=bool(MAN_PAGE.search(path)), literal_only=binary):
        how = " (in the strings of the libraries built from it)" if binary else ""
        return Outcome(q, "verified", f"{repo}@{ref[:12]}{how}")
    return Outcome(q, "changed", f"{repo}@{ref[:12]}:{path} no longer has the quote")


def pin_ref(repo: str, path: str, qs: list[str], sources: Sources) -> tuple[str | None, str]:
    """The commit to pin a file to: the head when every quote stands there, else the newest
    commit of its history that has them all."""
    head = sources.head(repo)
    if head is None:
        return None, "no snapshot"
    troff = bool(MAN_PAGE.search(path))
    binary = repo == "pytorch/pytorch" and wheel_file(repo, path) is None
    text = sources.text(repo, head, path)
    if text is not None and all(quote_stands(text, q, troff, binary) for q in qs):
        return head, "head"
    for sha in sources.history(repo, path):
        old = sources.text(repo, sha, path)
        if old is not None and all(quote_stands(old, q, troff) for q in qs):
            return sha, "older commit (the quote is gone from the head)"
    return None, "no commit has every quote"


def pin_card(path: Path, sources: Sources, log: Callable[[str], None]) -> int:
    """Rewrite the card's blob/main|master links to commits; the number of links pinned."""
    text = path.read_text(encoding="utf-8")
    card = parse_card(text)
    by_url: dict[str, list[str]] = {}
    for q in quotes(card):
        by_url.setdefault(q.source, []).append(q.quote)
    for src in card.source_urls:
        by_url.setdefault(src, [])
    pinned = 0
    for url, qs in sorted(by_url.items()):
        m = BLOB.fullmatch(url)
        if m is None or m["ref"] not in BRANCHES:
            continue
        repo = f"{m['owner']}/{m['repo']}"
        sha, why = pin_ref(repo, m["path"], qs, sources)
        if sha is None:
            log(f"{card.id}: {url}: not pinned ({why})")
            continue
        new = url.replace(f"/{m['ref']}/{m['path']}", f"/{sha}/{m['path']}", 1)
        text = re.sub(re.escape(url) + r"(?=[\s\"'#]|$)", new, text, flags=re.M)
        pinned += 1
        if why != "head":
            log(f"{card.id}: {url}: pinned to {sha[:12]}, {why}")
    parse_card(text)  # still a valid card
    path.write_text(text, encoding="utf-8")
    return pinned


def report(outcomes: list[Outcome], day: dt.date) -> str:
    counts = {s: sum(1 for o in outcomes if o.status == s)
              for s in ("verified", "changed", "not checkable")}
    lines = [
        f"# Quotes re-verified against their sources, {day.isoformat()}",
        "",
        "Made by `scripts/verify_quotes.py` in a developer session, from git snapshots of the",
        "cited repositories (and the installed torch and transformers wheels, whose commit or tag",
        "the links name). Quotes from issue threads and web pages are not checkable here.",
        "",
        f"{len(outcomes)} quotes: {counts['verified']} verified, {counts['changed']} changed, "
        f"{counts['not checkable']} not checkable.",
        "",
    ]
    changed = [o for o in outcomes if o.status == "changed"]
    if changed:
        lines += ["## Changed", ""]
        lines += [f"- `{o.quote.card}` {o.quote.where}: {o.note}: \"{o.quote.quote[:120]}\""
                  for o in changed]
        lines.append("")
    threads = [o for o in outcomes if o.status == "not checkable"
               and o.note.startswith("not a file")]
    files = [o for o in outcomes if o.status == "not checkable" and o not in threads]
    lines += ["## Not checkable", "",
              f"{len(threads)} quote(s) from issue threads, pull requests, commits and web pages "
              "(no text of them here), by site:", ""]
    hosts: dict[str, int] = {}
    for o in threads:
        key = re.sub(r"^(https?://[^/]+(?:/[^/]+/[^/]+)?).*", r"\1", o.quote.source)
        hosts[key] = hosts.get(key, 0) + 1
    lines += [f"- {k}: {v}" for k, v in sorted(hosts.items(), key=lambda kv: (-kv[1], kv[0]))]
    lines += ["", f"{len(files)} quote(s) from repository files with no snapshot at the "
              "linked commit here, by file:", ""]
    where: dict[str, int] = {}
    for o in files:
        m = BLOB.fullmatch(o.quote.source)
        key = f"{m['owner']}/{m['repo']}@{m['ref'][:12]}:{m['path']}" if m else o.quote.source
        where[key] = where.get(key, 0) + 1
    lines += [f"- {k}: {v}" for k, v in sorted(where.items())]
    lines += ["", "## Verified, by repository", ""]
    repos: dict[str, int] = {}
    for o in outcomes:
        if o.status == "verified":
            repo = o.note.split("@", 1)[0]
            repos[repo] = repos.get(repo, 0) + 1
    lines += [f"- {k}: {v}" for k, v in sorted(repos.items(), key=lambda kv: -kv[1])]
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mirror", type=Path, default=MIRROR)
    ap.add_argument("--pin", action="store_true", help="pin blob/main|master links first")
    ap.add_argument("--out", type=Path, default=None, help="report file (default: "
                    "docs/reviews/quotes-<today>.md)")
    ap.add_argument("--date", type=dt.date.fromisoformat, default=dt.date.today())
    args = ap.parse_args()
    sources = Sources(args.mirror)
    if args.pin:
        total = sum(pin_card(p, sources, print) for p in card_files())
        print(f"pinned {total} links")
    outcomes = [check(q, sources) for p in card_files()
                for q in quotes(parse_card(p.read_text(encoding="utf-8")))]
    out = args.out or ROOT / "docs" / "reviews" / f"quotes-{args.date.isoformat()}.md"
    out.write_text(report(outcomes, args.date), encoding="utf-8")
    for o in outcomes:
        if o.status == "changed":
            print(f"CHANGED {o.quote.card} {o.quote.where}: {o.note}")
    print(f"{len(outcomes)} quotes -> {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
