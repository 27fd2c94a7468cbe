"""Which release a folder is: its content digest, recomputed from the folder by the one function that `verify
--release`, `run`, `serve`, `tool`, `score` and the traces share, and a digest the user trusts compared with it.

A folder rewritten whole (every file, then every digest recomputed) agrees with itself: only a digest from elsewhere
(`build` printed it, the publisher's card states it) tells it from the release it was. The content digest names
release.json's every claim, the sha256 of every file among them; a reader that checks each file it uses against those
sha256 (pipeline.release.playable) therefore plays only the trusted release's bytes once the digest is the trusted
one."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from pipeline.core.canonical import read_bounded
from pipeline.core.errors import ReleaseError
from pipeline.release.stage import CARD, MAX_DOCUMENT_BYTES, blank_card, content_digest

DIGEST = re.compile(r"[0-9a-f]{64}")


def expected_digest(text: str) -> str:
    """A release digest as a user gives it (`sha256:<hex>` as `build` prints it and the card states it, or the hex)."""
    value = text.strip().lower().removeprefix("sha256:")
    if not DIGEST.fullmatch(value):
        raise ReleaseError(
            f"--expect {text!r}: not a release digest; give the sha256:<64 hex digits> that `build` printed or the "
            "release's dataset card states"
        )
    return value


def folder_digest(folder: Path, manifest: dict) -> str:
    """The release digest of a folder's content (pipeline.release.stage.content_digest): release.json's claims
    (`manifest`, as read from the folder) and its card, whose statement of the digest it claims is blanked. Raises
    ValueError when release.json claims no digest (a release built before releases had one) or the card is larger
    than a card, OSError when the card cannot be read."""
    claimed = manifest.get("release_digest")
    if not isinstance(claimed, str) or not DIGEST.fullmatch(claimed):
        raise ValueError("release.json claims no release digest (built before releases carried one)")
    card = read_bounded(folder / CARD, MAX_DOCUMENT_BYTES)
    return content_digest(manifest, hashlib.sha256(blank_card(card, claimed)).hexdigest())


def not_expected(folder: Path, actual: str | None, wanted: str) -> str | None:
    """Why a folder whose content digest is `actual` (None: it cannot be computed) is not the release the user trusts
    (`wanted`, from `expected_digest`); None when it is."""
    if actual == wanted:
        return None
    return (
        f"{folder}: its content digest is {'unknown' if actual is None else 'sha256:' + actual}, not the "
        f"sha256:{wanted} you expect: not the release you trust (another version, or changed); download it again "
        "from its publisher"
    )
