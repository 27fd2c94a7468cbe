"""`corpus draft`'s reading of zip archives as upstream ships them (daiad: one CSV inside each): an archive holding
one data member is a value file, read by the build through values.archive_member. The draft inflates that member,
within the build's own bound, into a scratch folder and reads it there as it reads a plain file; the raw folder is
never written."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from pipeline.core.errors import IngestError
from pipeline.ingest.layouts import archive_member, open_archive

# What a build inflates of a member at most (values.max_member_bytes' default): a member the build would refuse is
# not read by the draft either, and nothing larger is ever held in memory.
DRAFT_MEMBER_BYTES = 1 << 30
SKIPPED_FOLDERS = ("__MACOSX/",)  # resource forks a Mac's archiver adds beside each member


@dataclass(frozen=True)
class Member:
    """The data member of one archive, inflated into the scratch folder."""

    name: str  # its path inside the archive
    extracted: Path  # where the draft reads it


def data_members(path: Path, not_data: re.Pattern) -> list[str]:
    """The members of a zip archive that may hold values: not folders, Mac resource forks or files named as notes,
    licenses or other archives (`not_data`); empty when the file is no readable zip archive."""
    try:
        with open_archive(path) as archive:
            infos = archive.infolist()
    except IngestError:
        return []
    return sorted(
        i.filename
        for i in infos
        if not i.is_dir()
        and not i.filename.startswith(SKIPPED_FOLDERS)
        and not not_data.search(PurePosixPath(i.filename).name)
    )


def extract(raw: Path, files: list[Path], scratch: Path, not_data: re.Pattern) -> dict[str, Member]:
    """Archive path (below `raw`) -> its one data member, inflated under `scratch`; an archive of several data
    members, none, or one the build could not read (too large, encrypted, compressed past a bound) is left out."""
    found = {}
    for path in files:
        if path.suffix.lower() != ".zip":
            continue
        names = data_members(path, not_data)
        if len(names) != 1:
            continue
        try:
            name, data = archive_member(path, re.escape(names[0]), DRAFT_MEMBER_BYTES)
        except IngestError:
            continue
        rel = path.relative_to(raw).as_posix()
        target = scratch / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        found[rel] = Member(name, target)
    return found


def member_pattern(names: list[str]) -> str:
    """values.archive_member for the members of a group's archives: the one name, escaped; else the start and end
    the names share around '.*' (swm_trialA.csv, swm_trialA_extended.csv: swm_trialA.*\\.csv)."""
    distinct = sorted(set(names))
    if len(distinct) == 1:
        return re.escape(distinct[0])
    prefix = os.path.commonprefix(distinct)
    suffix = os.path.commonprefix([n[len(prefix) :][::-1] for n in distinct])[::-1]
    return f"{re.escape(prefix)}.*{re.escape(suffix)}"
