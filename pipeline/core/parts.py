"""Intermediate parts: the tables a worker (a spawned process or a Ray task) leaves for the main process to merge, as
uncompressed Arrow IPC files.

They live in the stage's own folder (`<stage>/.parts`, removed when the stage ends) unless the build is given a parts
location (`--parts`): an existing folder, or a URL of a scheme in SCHEMES (s3://bucket/prefix, gs://, abfs://, or
file:// on a mount that every node shares). The workers of a multi-node cluster do not share the main machine's disk,
so there the parts must go somewhere all of them reach. Parts are never outputs: where they go changes nothing that is
written.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pyarrow as pa
import xxhash

from pipeline.core.errors import ConfigError, StageError

PARTS = ".parts"


def is_url(location: str) -> bool:
    return "://" in location


def _filesystem(location: str):
    """(fsspec filesystem, path inside it) of a URL; a one-line error when fsspec cannot reach its protocol."""
    try:
        from fsspec.core import url_to_fs

        return url_to_fs(location)
    except (ImportError, ValueError, TypeError) as exc:
        reason = " ".join(str(exc).split())
        raise ConfigError(
            f"parts location {location!r}: fsspec cannot open it ({reason}); install the package for its protocol "
            "(e.g. s3fs for s3://, gcsfs for gs://) or give a local folder or file:// URL with --parts"
        ) from exc


# The schemes a parts location may have: storage that every worker reaches and can write. Others (ftp, http, zip, tar,
# github, reference, memory, chained URLs with ::) are read-only, private to one process or not storage at all.
SCHEMES = ("file", "s3", "gs", "gcs", "abfs", "az")
ADVICE = f"give an existing folder or a URL of {', '.join(s + '://' for s in SCHEMES)} with --parts"


def check_location(location: str) -> str:
    """A parts location as given (`--parts`): an existing local folder (made absolute: workers may start in another
    folder), a file:// URL of one, or a URL of another scheme in SCHEMES whose package is installed. Nothing is created:
    a folder that does not exist is refused, so a mistyped location cannot leave folders behind."""
    where = f"parts location {location!r}"
    if not location.strip():
        raise ConfigError(f"{where} is empty; {ADVICE}")
    if not is_url(location):
        return _local_folder(Path(location), where)
    scheme, rest = location.split("://", 1)
    if scheme not in SCHEMES:
        raise ConfigError(f"{where}: scheme {scheme!r} is not one of {', '.join(SCHEMES)}; {ADVICE}")
    if not rest.strip("/") and scheme != "file":
        raise ConfigError(f"{where} names no bucket or container; {ADVICE}")
    if scheme == "file":
        if not rest:
            raise ConfigError(f"{where} names no folder; {ADVICE}")
        return "file://" + _local_folder(Path(_filesystem(location)[1]), where)  # fsspec made it absolute
    _filesystem(location)  # the package of the protocol is installed
    return location


def _local_folder(path: Path, where: str) -> str:
    """The absolute path of an existing folder; a one-line error (and nothing created) otherwise."""
    try:
        folder = path.expanduser().resolve()
        is_folder = folder.is_dir()
    except (OSError, RuntimeError, ValueError) as exc:  # ~user unknown, a symlink loop, a NUL byte, a name too long
        raise ConfigError(f"{where} is not a usable path ({exc}); {ADVICE}") from exc
    if not is_folder:
        what = "is a file, not a folder" if folder.exists() else "does not exist"
        raise ConfigError(f"{where}: {str(folder)!r} {what}; create it first, or {ADVICE}")
    return str(folder)


def stage_parts(out: Path, location: str | None, stage: str) -> str:
    """Where one stage's workers leave their parts: `out/.parts`, or a folder of the parts location named by the stage
    and its output folder (two builds that share a parts location never share a folder)."""
    if location is None:
        return str(out / PARTS)
    return join(location, f"{stage}-{xxhash.xxh3_64_hexdigest(str(out.resolve()).encode())}")


def join(location: str, *names: str) -> str:
    if not is_url(location):
        return str(Path(location, *names))
    return (location if location.endswith("/") else location + "/") + "/".join(names)


@contextmanager
def _open(location: str, mode: str):
    try:
        if is_url(location):
            fs, path = _filesystem(location)
            if "w" in mode:
                fs.makedirs(fs._parent(path), exist_ok=True)
            with fs.open(path, mode) as handle:
                yield handle
        else:
            if "w" in mode:
                Path(location).parent.mkdir(parents=True, exist_ok=True)
            with pa.OSFile(location, mode) as handle:
                yield handle
    except (OSError, pa.ArrowInvalid) as exc:  # a missing or unwritable part, or one that is not an Arrow file
        verb = "write" if "w" in mode else "read"
        raise StageError(f"{location}: cannot {verb} this intermediate part ({exc}); check the parts location") from exc


def write_part(table: pa.Table, location: str, batch_rows: int = 1 << 20) -> None:
    """A worker's intermediate rows: an uncompressed Arrow IPC file (no encoding work, read back as is), in record
    batches of at most `batch_rows` rows (what a reader holds at a time)."""
    with _open(location, "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table, max_chunksize=batch_rows)


def iter_part(location: str) -> Iterator[pa.RecordBatch]:
    """The record batches of a part, read one at a time into memory (not memory-mapped: RSS stays bounded)."""
    with _open(location, "rb") as source:
        reader = pa.ipc.open_file(source)
        for index in range(reader.num_record_batches):
            yield reader.get_batch(index)


def read_part(location: str) -> pa.Table:
    with _open(location, "rb") as source:
        return pa.ipc.open_file(source).read_all()


def remove_parts(location: str) -> None:
    """Remove a stage's parts (nothing when there are none)."""
    if not is_url(location):
        shutil.rmtree(location, ignore_errors=True)
        return
    fs, path = _filesystem(location)
    try:
        if fs.exists(path):
            fs.rm(path, recursive=True)
    except OSError:
        pass  # leftovers are not outputs: a later build of the stage overwrites the parts it reads
