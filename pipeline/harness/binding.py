"""Results bound to the release they were played on: the release digest a play records in its trace's header, the
digest the user trusts (`--expect`) compared with it, and the warnings of `score` and `leaderboard` when traces
side by side were played on different releases, on none, or on another than the project's build made.

A release folder's digest is its content's (pipeline.release.trust). A project's play (`--corpus`) is bound to the
project's built release when what it plays is that release's: the episode file is the release's split file (same
xxh3) and the store stage is the one the release records (its outputs' digests); the store file itself is checked
against the build's record on every open (pipeline.store.reader.checked_store)."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING

from pipeline.core.canonical import digest_file, loads_untrusted, read_bounded
from pipeline.core.errors import RunError
from pipeline.core.manifest import data_identity, read_manifest
from pipeline.core.workspace import Workspace
from pipeline.release.stage import MAX_DOCUMENT_BYTES, RELEASE_MANIFEST
from pipeline.release.trust import expected_digest, folder_digest

if TYPE_CHECKING:
    from pipeline.release.playable import Release

UNBOUND = "bound to no release"
REBUILD = "rebuild the project (`telemetry-bench build`), or play the release you trust (--release DIR --expect DIGEST)"


def project_digest(ws: Workspace, corpus: str, episodes: Path | None = None, split: str | None = None) -> str | None:
    """The digest of the project's built release of `corpus` when the project's store (and, given, the episode file
    of `split`) are that release's; None when there is no release, or what is played is not it."""
    folder = ws.stage_dir(corpus, "release")
    try:
        manifest = loads_untrusted(read_bounded(folder / RELEASE_MANIFEST, MAX_DOCUMENT_BYTES))
        store = read_manifest(ws.stage_dir(corpus, "store"))
        if store is None or manifest["stages"]["store"] != data_identity(store.model_dump(mode="json")):
            return None
        if episodes is not None and manifest["files"][f"{split}.jsonl"]["xxh3"] != digest_file(episodes):
            return None
        return folder_digest(folder, manifest)
    except (OSError, ValueError, KeyError, TypeError):  # no release, or one no build writes: bound to none
        return None


def built_digest(ws: Workspace, corpus: str) -> str | None:
    """The release digest the project's build printed for `corpus` (its release stage's record), None without one."""
    manifest = read_manifest(ws.stage_dir(corpus, "release"))
    found = manifest.details.get("release_digest") if manifest is not None else None
    return found if isinstance(found, str) else None


def played_digest(
    ws: Workspace, corpus: str, release: Release | None, episodes: Path | None = None, split: str | None = None
) -> str | None:
    """The release a play is bound to: the release folder's content digest, else the project's (`project_digest`)."""
    return release.digest if release is not None else project_digest(ws, corpus, episodes, split)


def require(expect: str | list[str] | None, subject: str, actual: str | None, fix: str) -> None:
    """Refuse, in one line, what was played (or is about to be) on another release than the one the user trusts
    (`expect`; a list: any of them, as inspect's -T expect names one per corpus of an eval-set): `subject` says what
    ("the project's build of ucam is", "t.jsonl was played on"), `fix` what to do."""
    if expect is None:
        return
    wanted = [expected_digest(e) for e in ([expect] if isinstance(expect, str) else expect)]
    if actual not in wanted:
        played = UNBOUND if actual is None else f"release sha256:{actual}"
        trusted = " nor ".join(f"sha256:{w}" for w in wanted)
        raise RunError(f"{subject} {played}, not the {trusted} you expect: not the release you trust; {fix}")


def require_trace(expect: str | None, path: Path, played: str | None) -> None:
    """Refuse a trace whose header records another release (`played`) than the one the user trusts."""
    require(expect, f"{path} was played on", played, "score and evaluate only traces played on the release you trust")


def digest_warnings(ws: Workspace, summaries: list[dict]) -> list[str]:
    """What `score` and `leaderboard` warn of, over score summaries (pipeline.harness.traces, one release digest
    each): traces bound to no release; traces of one corpus and split played on different releases; traces of a
    project corpus played on another release than the project's build made (the digest `build` printed)."""
    warnings = [
        f"{_names(s['traces'])}: {UNBOUND} (no release_digest in the header: written before traces recorded it, or "
        "played on a build without a release); play again to bind the results to a release"
        for s in summaries
        if s["release_digest"] is None
    ]
    side_by_side: dict[tuple[str, str], dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for s in summaries:
        if s["release_digest"] is not None:
            side_by_side[(s["corpus"], s["split"])][s["release_digest"]] += [Path(t).name for t in s["traces"]]
    for (corpus, split), digests in sorted(side_by_side.items()):
        if len(digests) > 1:
            listed = "; ".join(f"sha256:{d} ({_names(names)})" for d, names in sorted(digests.items()))
            warnings.append(f"traces of {corpus} {split} side by side were played on different releases: {listed}")
        built = built_digest(ws, corpus)
        warnings += [
            f"{_names(names)}: played on release sha256:{digest}, not the sha256:{built} this project's "
            f"build made of {corpus}"
            for digest, names in sorted(digests.items())
            if built is not None and digest != built
        ]
    return warnings


def _names(traces: list[str]) -> str:
    """Traces as a warning names them: their file names (a results file never records a machine's paths)."""
    return ", ".join(sorted(Path(t).name for t in traces))
