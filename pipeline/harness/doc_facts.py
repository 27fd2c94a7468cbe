"""Numbers the docs quote from the build, filled from the build: a figure of README.md or docs/ that comes from the
artifacts (how many corpora are released, episodes per split, commitment outcomes, a score that follows from them)
is written between markers, `<!--fact:NAME-->13<!--/fact-->`, which Markdown does not show. `make docs` (`python -m
pipeline.harness.doc_facts`) writes each marked figure from the current build; `--check` (and tests/test_doc_facts.py,
on the session's own build) fails on any that differs, or on a marker that names no fact. Hand-written counts drifted
as corpora landed ("the four shipped corpora" when five built); a marked one cannot.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq

MARKER = re.compile(r"<!--fact:([a-z0-9_.]+)-->(.*?)<!--/fact-->", flags=re.S)
WORDS = ("no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve")
DOCS = ("README.md", "docs")  # what is scanned for markers (docs/*.md)


def _word(n: int) -> str:
    return WORDS[n] if n < len(WORDS) else str(n)


def facts(artifacts: Path) -> dict[str, str]:
    """Every fact the build states, by name: `corpora.released` (and `_word`), and per released corpus C and split
    S `C.S.episodes`, `C.S.<outcome>` (episodes of that gold commitment outcome), `C.S.always_answer` (the accomplished
    rate of the gold path with every commitment decision made answer: the answer share, 4 decimals) and `C.sites`."""
    releases = sorted(p.parent for p in artifacts.glob("*/release/release.json"))
    out = {"corpora.released": str(len(releases)), "corpora.released_word": _word(len(releases))}
    for release in releases:
        corpus = release.parent.name
        manifest = json.loads((release / "release.json").read_text(encoding="utf-8"))
        for split, count in manifest["splits"].items():
            out[f"{corpus}.{split}.episodes"] = str(count)
            rows = (release / f"{split}.jsonl").read_text(encoding="utf-8").splitlines()
            outcomes = Counter(json.loads(row)["commitment_outcome"] for row in rows)
            for outcome in ("answer", "abstain", "re_clarify"):
                out[f"{corpus}.{split}.{outcome}"] = str(outcomes[outcome])
            if count:
                out[f"{corpus}.{split}.always_answer"] = f"{outcomes['answer'] / count:.4f}"
        sites = release / "store" / "sites.parquet"
        if sites.is_file():
            out[f"{corpus}.sites"] = str(pq.read_metadata(sites).num_rows)
    return out


def documents(root: Path) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def filled(text: str, known: dict[str, str], where: str) -> tuple[str, list[str]]:
    """The text with every marked figure the build's, and the problems (a marker naming no fact)."""
    problems: list[str] = []

    def one(match: re.Match) -> str:
        name = match.group(1)
        if name not in known:
            line = text.count("\n", 0, match.start()) + 1
            problems.append(f"{where}:{line}: <!--fact:{name}--> names no fact of this build ({len(known)} known)")
            return match.group(0)
        return f"<!--fact:{name}-->{known[name]}<!--/fact-->"

    return MARKER.sub(one, text), problems


def stale(root: Path, artifacts: Path) -> list[str]:
    """One line per marked figure that is not the build's (file:line, fact, quoted and built), or unknown marker."""
    known, problems = facts(artifacts), []
    for path in documents(root):
        text = path.read_text(encoding="utf-8")
        _, unknown = filled(text, known, str(path.relative_to(root)))
        problems += unknown
        for match in MARKER.finditer(text):
            name, quoted = match.group(1), match.group(2)
            if name in known and quoted != known[name]:
                line = text.count("\n", 0, match.start()) + 1
                problems.append(
                    f"{path.relative_to(root)}:{line}: {name} is quoted as {quoted!r}, the build says {known[name]!r}; "
                    "run `make docs`"
                )
    return problems


def write(root: Path, artifacts: Path) -> list[Path]:
    """Fill every marked figure from the build; the files changed."""
    known, changed = facts(artifacts), []
    for path in documents(root):
        text = path.read_text(encoding="utf-8")
        new, problems = filled(text, known, str(path.relative_to(root)))
        if problems:
            raise SystemExit("\n".join(problems))
        if new != text:
            path.write_text(new, encoding="utf-8")
            changed.append(path)
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Fill (or --check) the figures README.md and docs/ quote from the build"
    )
    parser.add_argument("--root", type=Path, default=Path.cwd())
    parser.add_argument("--artifacts", type=Path, default=None, help="default: ROOT/artifacts")
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 naming each stale figure")
    args = parser.parse_args(argv)
    artifacts = args.artifacts or args.root / "artifacts"
    if args.check:
        problems = stale(args.root, artifacts)
        print("\n".join(problems) or "every marked figure is the build's")
        return 1 if problems else 0
    for path in write(args.root, artifacts):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
