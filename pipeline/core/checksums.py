"""SHA256SUMS of a raw corpus folder: verify before ingest, write on request."""

from __future__ import annotations

import hashlib
from pathlib import Path

from pipeline.core.canonical import atomic_write_bytes, check_text, file_blocks
from pipeline.core.errors import ChecksumError

SUMS_NAME = "SHA256SUMS"


def sha256_file(path: Path, chunk: int = 1 << 22) -> str:
    hasher = hashlib.sha256()
    for block in file_blocks(path, chunk):
        hasher.update(block)
    return hasher.hexdigest()


def refuse_outside(folder: Path, path: Path) -> None:
    """One line when `path` (a file symlink) resolves outside `folder`: a raw corpus is what its folder holds, so such
    a link is never read (a linked folder inside it is refused too, by list_files)."""
    target = path.resolve()
    if not target.is_relative_to(folder.resolve()):
        raise ChecksumError(
            f"{path}: a symlink to {target}, outside the corpus folder {folder}; copy the file into the folder or "
            "remove the link"
        )


def _normalize(rel: str) -> str:
    return rel[2:] if rel.startswith("./") else rel


def read_sums(folder: Path) -> dict[str, str]:
    """Relative path -> expected sha256, from `<hex>  <path>` lines."""
    sums: dict[str, str] = {}
    path = folder / SUMS_NAME
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ChecksumError(f"{path}: not UTF-8 text ({exc}); regenerate it with checksum --write") from exc
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        parts = line.split(maxsplit=1)
        if len(parts) != 2 or len(parts[0]) != 64:
            raise ChecksumError(
                f"{path}:{number}: expected '<sha256>  <path>', got {line!r}; regenerate with checksum --write"
            )
        sums[_normalize(parts[1].lstrip("*").strip())] = parts[0].lower()
    return sums


def verify(folder: Path) -> dict[str, str]:
    """Check every listed file; returns relative path -> sha256. No SHA256SUMS: hashes computed, nothing checked."""
    if not (folder / SUMS_NAME).is_file():
        return {rel: sha256_file(folder / rel) for rel in list_files(folder)}
    sums = read_sums(folder)
    for rel, expected in sorted(sums.items()):
        target = folder / rel
        refuse_outside(folder, target)
        if not target.is_file():
            raise ChecksumError(
                f"{target}: listed in {folder / SUMS_NAME} but missing; restore the file from its source (see "
                f"SOURCE.md)"
            )
        actual = sha256_file(target)
        if actual != expected:
            raise ChecksumError(
                f"{target}: sha256 {actual[:12]}... does not match {expected[:12]}... in {SUMS_NAME}; "
                "restore the original file, or if the change is intended run "
                "`telemetry-bench checksum --corpus NAME --write`"
            )
    return sums


def list_files(folder: Path, sums: bool = False) -> list[str]:
    """The raw files below `folder` (relative paths, sorted; SHA256SUMS files too with `sums`, as a folder's identity
    has them); a name that is not UTF-8 is one line (it could not be recorded in a report or a manifest)."""
    found = list(folder.rglob("*"))
    linked = sorted(p for p in found if p.is_symlink() and p.is_dir())
    if linked:  # the walk never enters it, a file pattern reads through it: data that no identity would hold
        raise ChecksumError(
            f"{linked[0]}: a link to the folder {linked[0].resolve()}, inside the corpus folder {folder}; a raw "
            "corpus is what its folder holds: copy the files in place of the link, or remove it"
        )
    files = sorted(
        p.relative_to(folder).as_posix()
        for p in found
        if p.is_file() and (sums or p.name != SUMS_NAME) and not p.name.startswith(".")
    )
    for rel in files:
        refuse_outside(folder, folder / rel)
        try:
            check_text(rel, "file name")
        except ValueError as exc:
            raise ChecksumError(f"{folder}: {exc}; rename the file") from None
    return files


def write_sums(folder: Path) -> int:
    """Write SHA256SUMS for every file in the folder; returns how many files it lists."""
    if not folder.is_dir():
        raise ChecksumError(f"{folder}: raw corpus folder not found")
    files = list_files(folder)
    text = "".join(f"{sha256_file(folder / rel)}  {rel}\n" for rel in files)
    atomic_write_bytes(folder / SUMS_NAME, text.encode("utf-8"))
    return len(files)
