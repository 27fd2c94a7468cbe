"""Value layouts: each reads one raw file into a frame of raw text plus the slices that map it to streams."""

from __future__ import annotations

import contextlib
import fnmatch
import struct
import unicodedata
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from contracts.corpus import BtsPickle, CorpusMapping, FilePerStream, LongCsv, TimeSpec, WideCsv
from pipeline.core import patterns
from pipeline.core.errors import IngestError, UnsafePickle
from pipeline.core.executor import Scope
from pipeline.ingest.cleaning import Slice
from pipeline.ingest.csvread import RawTable, read_strings
from pipeline.ingest.metadata import Resolver, fill
from pipeline.ingest.paths import file_groups
from pipeline.ingest.pickles import Series, load_series
from pipeline.ingest.timeparse import BAD as BAD_TIMESTAMP
from pipeline.ingest.timeparse import parse_times, spec_for_file


@dataclass
class ReadFile:
    """One raw value file, read: `frame` has row, ts, ts_reason, raw text columns (and `sid` for long files)."""

    rel: str
    frame: pl.DataFrame
    slices: list[Slice]
    malformed: list[tuple[int, str, str]]  # records set aside: (record number, text, reason of each value cell)
    value_labels: list[str]  # value columns, for the cells of malformed records
    cells: int
    shared: bool = False  # holds many streams: every batch reads it and keeps only the cells it owns


INPUT = "in:"  # prefix of every input column in a read frame: no input name can collide with row, ts, sid, value...


def _input(name: str) -> str:
    return INPUT + name


def read_raw(path: Path, layout: WideCsv | LongCsv | FilePerStream) -> RawTable:
    if layout.archive_member is None:
        return read_strings(path, layout.delimiter, layout.encoding, layout.header, layout.columns)
    name, data = archive_member(path, layout.archive_member, layout.max_member_bytes)
    shown = Path(f"{path}:{name}")  # errors name the member inside its archive
    return read_strings(shown, layout.delimiter, layout.encoding, layout.header, layout.columns, data=data)


def archive_member(path: Path, member: str, limit: int, inflate: bool = True) -> tuple[str, bytes]:
    """The one member of a zip archive whose path `member` fully matches, and its bytes (inflated within `limit`;
    b"" without `inflate`, which checks all but the inflating); one IngestError line when the file is no zip archive,
    when no member or several match, or when the member is too large or compressed by a method not read within a
    bound."""
    if not path.is_file():
        raise IngestError(f"{path}: file not found; restore it or fix values.files in the corpus mapping")
    with open_archive(path) as archive:
        names = sorted(
            i.filename for i in archive.infolist() if not i.filename.endswith("/")
        )  # is_dir: IndexError on ''
        matched = [n for n in names if patterns.fullmatch(member, n, "values.archive_member")]
        if len(matched) != 1:
            raise IngestError(
                f"{path}: values.archive_member {member!r} matches "
                + (f"{len(matched)} members ({', '.join(matched[:5])})" if matched else "no member")
                + f"; the archive holds {', '.join(names[:10]) or 'nothing'}; make it match exactly one"
            )
        try:
            if not inflate:
                _readable(archive.getinfo(matched[0]), limit)
                return matched[0], b""
            return matched[0], _member_bytes(path, archive, matched[0], limit)
        except (OversizedMember, UnsupportedCompression) as exc:
            raise IngestError(f"{path}:{matched[0]}: {exc}; raise values.max_member_bytes or extract it") from exc
        except EncryptedMember as exc:
            raise IngestError(
                f"{path}:{matched[0]}: {exc}; extract it with its password and point values.files at the extracted file"
            ) from exc
        except BROKEN_MEMBER as exc:
            raise IngestError(
                f"{path}:{matched[0]}: the member cannot be inflated ({exc}); restore the archive"
            ) from exc


def _require(raw: RawTable, columns: list[str], what: str) -> None:
    absent = [c for c in columns if c not in raw.header]
    if absent:
        raise IngestError(
            f"{raw.path}: column {', '.join(map(repr, absent))} named in {what} is absent; "
            f"the file has {', '.join(raw.header)}; fix the mapping"
        )


def _text_frame(raw: RawTable, mapping: CorpusMapping, keep: list[str]) -> pl.DataFrame:
    """Records as strings: the time column and `keep`, named `in:<name>`, plus `row`."""
    names = [mapping.time.column, *(c for c in keep if c != mapping.time.column)]
    named = raw.table.select(names).rename_columns([_input(c) for c in names])  # in arrow: polars loses a "" name
    return pl.from_arrow(named).with_columns(row=pl.Series(raw.rows))


def _checked_times(
    frame: pl.DataFrame, raw: RawTable, mapping: CorpusMapping, keep: list[str], spec: TimeSpec, where: str
) -> pl.DataFrame:
    """A frame whose times are parsed (`ts`, `ts_reason`), its row order checked; the time column dropped unless
    kept."""
    time = _input(mapping.time.column)
    if frame.height and frame["ts"].null_count() == frame.height:
        first = frame[time][0]
        raise IngestError(
            f"{raw.path}: row {raw.rows[0]}: no value of time column {mapping.time.column!r} matches format "
            f"{spec.format!r} (first value {first!r}); fix {where}"
        )
    order = mapping.time.row_order
    if order != "any":
        timed = frame.select("row", "ts").filter(pl.col("ts").is_not_null())
        step = timed["ts"].diff()
        wrong = (step < 0) if order == "ascending" else (step > 0)
        bad = timed.filter(wrong.fill_null(False))
        if bad.height:
            raise IngestError(
                f"{raw.path}: row {bad['row'][0]}: time goes against the declared {order} row order "
                f'({bad.height} such rows); fix the file or declare time.row_order = "any"'
            )
    return frame.drop(time) if mapping.time.column not in keep else frame


def _timed_frame(raw: RawTable, mapping: CorpusMapping, keep: list[str], rel: str) -> pl.DataFrame:
    """Records as strings (only `keep` columns, named `in:<name>`) plus `row`, `ts`, `ts_reason`; checks the row
    order. The time format is the file's own when a time.file_formats entry matches its path."""
    spec, where = spec_for_file(mapping.time, rel)
    frame = parse_times(_text_frame(raw, mapping, keep), _input(mapping.time.column), spec)
    return _checked_times(frame, raw, mapping, keep, spec, where)


def _codes(
    resolver: Resolver, rel: str, site: str, keys: list[str], template: str, groups: dict[str, str] | None = None
) -> dict[str, int | None]:
    codes = {}
    for key in keys:
        stream = resolver.stream(rel, site, key, template, groups)
        codes[key] = resolver.code(stream.stream_id) if stream else None
    unmapped = sorted(k for k, v in codes.items() if v is None)
    if unmapped and resolver.unmapped_policy == "error":
        at = f" at site {site!r}" if resolver.site_specific else ""
        raise IngestError(
            f"{rel}: no metadata for {', '.join(map(repr, unmapped))}{at}; declare them in the mapping, "
            'or set metadata.unmapped_columns = "reject" to record their cells as rejects'
        )
    return codes


SITE = "site:"  # the stripped site cell of each row (null when empty), beside the input columns
MISSING_SITE = "missing_site"


def _site_key(text: str) -> str:
    """The site id a site cell names: NFC-normalized and stripped, so look-alike spellings are one id."""
    return unicodedata.normalize("NFC", text).strip()


def _site_cells(frame: pl.DataFrame, column: str, where: Path) -> tuple[pl.DataFrame, list[str]]:
    """The frame with each row's site key (`site:`, null when the cell is empty: its cells are rejected as
    missing_site before any other reason) and the distinct site keys, sorted. Two spellings in one file that are one
    key (NFC vs NFD, a trailing space) are one IngestError line: merged, their rows would collide unseen."""
    spellings = sorted(frame[_input(column)].drop_nulls().unique().to_list())
    keys = {spelling: _site_key(spelling) for spelling in spellings}
    by_key: dict[str, list[str]] = {}
    for spelling, key in keys.items():
        by_key.setdefault(key, []).append(spelling)
    clash = next((group for key, group in sorted(by_key.items()) if len(group) > 1 and key), None)
    if clash:
        raise IngestError(
            f"{where}: site_column {column!r} holds {' and '.join(map(ascii, clash))}, one site id "
            f"{_site_key(clash[0])!r} once NFC-normalized and stripped; write one spelling of each site id"
        )
    text = pl.col(_input(column)).replace_strict(keys, default=None, return_dtype=pl.String)
    frame = frame.with_columns(pl.when(text != "").then(text).alias(SITE))
    frame = frame.with_columns(
        ts_reason=pl.when(pl.col(SITE).is_null()).then(pl.lit(MISSING_SITE)).otherwise(pl.col("ts_reason"))
    )
    return frame, sorted(frame[SITE].drop_nulls().unique().to_list())


def _sites_of_rows(
    resolver: Resolver, rel: str, layout: WideCsv | LongCsv, groups: dict[str, str], values: list[str]
) -> dict[str, str]:
    """Site cell value -> site id, through the site template ({site} is the cell's value)."""
    return {value: resolver.site_for(rel, {**groups, "site": value}, layout.site or "{site}") for value in values}


def read_wide(path: Path, rel: str, mapping: CorpusMapping, resolver: Resolver, scope: Scope) -> ReadFile | None:
    layout: WideCsv = mapping.values
    raw = read_raw(path, layout)
    if layout.site_column is None:
        _require(raw, [mapping.time.column, *layout.ignore_columns], "time.column / values.ignore_columns")
    else:
        _require(
            raw,
            [mapping.time.column, layout.site_column, *layout.ignore_columns],
            "time.column / values.site_column / values.ignore_columns",
        )
    groups = file_groups(rel, layout.file_pattern)
    skip = {mapping.time.column, layout.site_column, *layout.ignore_columns}
    columns = [c for c in raw.header if c not in skip]
    if layout.site_column is None:
        site = resolver.site_for(rel, groups, layout.site)
        resolver.check_columns(rel, columns, site)
        codes = _codes(resolver, rel, site, columns, layout.stream_id, groups)
        frame = _timed_frame(raw, mapping, columns, rel)
        slices = [
            Slice(column=_input(c), label=c, sid=codes[c] if codes[c] is not None else -1, unmapped=codes[c] is None)
            for c in columns
        ]
    else:
        frame, values = _site_cells(
            _timed_frame(raw, mapping, [*columns, layout.site_column], rel), layout.site_column, raw.path
        )
        by_value = {}
        for value, site in _sites_of_rows(resolver, rel, layout, groups, values).items():
            resolver.check_columns(rel, columns, site)
            by_value[value] = _codes(resolver, rel, site, columns, layout.stream_id, groups)
        frame = frame.with_columns(
            pl.col(SITE)
            .replace_strict({v: codes[c] for v, codes in by_value.items()}, default=None, return_dtype=pl.Int32)
            .alias(f"sid:{c}")
            for c in columns
        )
        slices = [Slice(column=_input(c), label=c, sid=None, codes=f"sid:{c}") for c in columns]
    return ReadFile(
        rel,
        frame,
        slices,
        raw.set_aside,
        columns,
        raw.records * len(columns),
        shared=True,
    )


def read_long(path: Path, rel: str, mapping: CorpusMapping, resolver: Resolver, scope: Scope) -> ReadFile | None:
    layout: LongCsv = mapping.values
    raw = read_raw(path, layout)
    site_column = [layout.site_column] if layout.site_column else []
    _require(
        raw, [mapping.time.column, layout.stream_column, layout.value_column, *site_column], "time.column / values"
    )
    groups = file_groups(rel, layout.file_pattern)
    frame = _timed_frame(raw, mapping, [layout.stream_column, layout.value_column, *site_column], rel)
    stream_key = pl.col(_input(layout.stream_column))
    if layout.site_column is None:
        site = resolver.site_for(rel, groups, layout.site)
        keys = sorted(set(frame[_input(layout.stream_column)].to_list()))
        codes = _codes(resolver, rel, site, keys, layout.stream_id, groups)
        sid = stream_key.replace_strict(codes, default=None, return_dtype=pl.Int32)
    else:
        frame, values = _site_cells(frame, layout.site_column, raw.path)
        # Each site's keys in one pass (filtering the pairs once per site was quadratic in the sites of a file).
        keys_of = dict(
            frame.filter(pl.col(SITE).is_not_null())
            .group_by(SITE)
            .agg(pl.col(_input(layout.stream_column)).unique().sort())
            .iter_rows()
        )
        codes = {}
        for value, site in _sites_of_rows(resolver, rel, layout, groups, values).items():
            keys = keys_of[value]
            codes |= {
                f"{value}\x00{k}": c for k, c in _codes(resolver, rel, site, keys, layout.stream_id, groups).items()
            }
        pair = pl.concat_str([pl.col(SITE), stream_key], separator="\x00")
        sid = pair.replace_strict(codes, default=None, return_dtype=pl.Int32)
    frame = frame.with_columns(sid=sid)
    slices = [Slice(column=_input(layout.value_column), label=layout.value_column, sid=None)]
    return ReadFile(rel, frame, slices, raw.set_aside, [layout.value_column], raw.records, shared=True)


def _open_file_per_stream(
    path: Path, rel: str, mapping: CorpusMapping, resolver: Resolver, scope: Scope
) -> tuple[RawTable, str, int | None] | None:
    """One file of the file_per_stream layout, its stream registered: (raw records, value column, stream code), or
    None when another batch owns its stream."""
    layout: FilePerStream = mapping.values
    groups = file_groups(rel, layout.file_pattern)
    key = fill(layout.key, groups, "values.key", rel) if layout.key is not None else groups["key"]
    site = resolver.site_for(rel, groups, layout.site)
    # Every batch registers the stream (the catalog stays the same everywhere); only its owner reads the file.
    code = _codes(resolver, rel, site, [key], layout.stream_id, groups)[key]
    if not scope.owns(resolver.stream_id_for(rel, site, key, layout.stream_id, groups) or rel):
        return None
    raw = read_raw(path, layout)
    value_column = _value_column(raw, layout.value_column)
    _require(raw, [mapping.time.column, value_column], "time.column / values.value_column")
    return raw, value_column, code


def _per_stream_read(rel: str, frame: pl.DataFrame, raw: RawTable, value_column: str, code: int | None) -> ReadFile:
    sl = Slice(
        column=_input(value_column),
        label=value_column,
        sid=code if code is not None else -1,
        unmapped=code is None,
    )
    return ReadFile(rel, frame, [sl], raw.set_aside, [value_column], raw.records)


def read_file_per_stream(
    path: Path, rel: str, mapping: CorpusMapping, resolver: Resolver, scope: Scope
) -> ReadFile | None:
    opened = _open_file_per_stream(path, rel, mapping, resolver, scope)
    if opened is None:
        return None
    raw, value_column, code = opened
    return _per_stream_read(rel, _timed_frame(raw, mapping, [value_column], rel), raw, value_column, code)


PARSE_ROWS = 1 << 20  # rows of the files whose times are parsed as one column (their raw text is held until then)


def read_files_per_stream(
    files: list[tuple[Path, str]], mapping: CorpusMapping, resolver: Resolver, scope: Scope
) -> list[ReadFile | None]:
    """`read_file_per_stream` of every file, in order, the same reads, with the times of consecutive files that share
    a time spec parsed as one column (up to PARSE_ROWS rows): a corpus of many small files parsed file by file spends
    most of its time in polars' work per call (ucam, 108 files of a year of hours: 0.49-0.61 s against 0.15-0.23 s as
    one column). Each file's checks run on its own rows, in file order, and a file that cannot be read first lets the
    files before it be checked, so the first error is the one a file-by-file read gives."""
    reads: list[ReadFile | None] = [None] * len(files)
    # (file number, raw records, value column, stream code, text frame, where the file's format is set)
    pending: list[tuple[int, RawTable, str, int | None, pl.DataFrame, str]] = []
    pending_spec: TimeSpec | None = None
    pending_rows = 0
    time = _input(mapping.time.column)

    def flush() -> None:
        nonlocal pending_spec, pending_rows
        if not pending:
            return
        # One name for the value column, whatever each file calls it.
        parts = [frame.rename({_input(value_column): VALUE_TEXT}) for _, _, value_column, _, frame, _ in pending]
        parsed = parse_times(pl.concat(parts), time, pending_spec)
        offset = 0
        for index, raw, value_column, code, frame, where in pending:
            mine = parsed.slice(offset, frame.height).rename({VALUE_TEXT: _input(value_column)})
            offset += frame.height
            checked = _checked_times(mine, raw, mapping, [value_column], pending_spec, where)
            reads[index] = _per_stream_read(files[index][1], checked, raw, value_column, code)
        pending.clear()
        pending_spec, pending_rows = None, 0

    for index, (path, rel) in enumerate(files):
        try:
            opened = _open_file_per_stream(path, rel, mapping, resolver, scope)
        except IngestError:
            flush()  # the files before it may hold an earlier error
            raise
        if opened is None:
            continue
        raw, value_column, code = opened
        if value_column == mapping.time.column:  # one column for both: read on its own
            flush()
            reads[index] = _per_stream_read(
                rel, _timed_frame(raw, mapping, [value_column], rel), raw, value_column, code
            )
            continue
        spec, where = spec_for_file(mapping.time, rel)
        if pending and (spec != pending_spec or pending_rows >= PARSE_ROWS):
            flush()
        frame = _text_frame(raw, mapping, [value_column])
        pending.append((index, raw, value_column, code, frame, where))
        pending_spec, pending_rows = spec, pending_rows + frame.height
    flush()
    return reads


VALUE_TEXT = "value_text:"  # the value column of files parsed together (no input name starts with it: INPUT does)


def _value_column(raw: RawTable, named: str) -> str:
    """The value column a name or a pattern with '*' names ('Value (*)': the one header matching it, whatever unit
    it writes); a pattern matching no column or several is one IngestError line."""
    if "*" not in named:
        return named
    found = [c for c in raw.header if fnmatch.fnmatchcase(c, named)]
    if len(found) != 1:
        raise IngestError(
            f"{raw.path}: values.value_column {named!r} matches {len(found)} columns of {', '.join(raw.header)}; "
            "make it match exactly one"
        )
    return found[0]


READERS = {"wide_csv": read_wide, "long_csv": read_long, "file_per_stream": read_file_per_stream}


def open_archive(path: Path) -> zipfile.ZipFile:
    """A zip archive of value members; one IngestError line when it is not a zip, or when a member's name is not the
    UTF-8 the archive says it is (zipfile cannot list such an archive at all)."""
    try:
        return zipfile.ZipFile(path)
    except zipfile.BadZipFile as exc:
        raise IngestError(
            f"{path}: not a zip archive ({exc}); restore the archive or point values.files at the folder"
        ) from exc
    except UnicodeDecodeError as exc:
        raise IngestError(
            f"{path}: a member's name is not valid UTF-8 although the archive says it is ({exc}); restore the archive "
            "or extract it and point values.files at the folder"
        ) from exc
    except (*BROKEN_MEMBER, ValueError) as exc:  # offsets and counts out of the file: a damaged central directory
        raise IngestError(
            f"{path}: a damaged zip archive ({type(exc).__name__}: {exc}); restore the archive or point values.files "
            "at the folder"
        ) from exc


def _members(path: Path) -> list[tuple[str, int]]:
    """(member name, size) of an archive (.zip, its declared sizes) or a folder, sorted by name."""
    if path.is_dir():
        return [(p.relative_to(path).as_posix(), p.stat().st_size) for p in sorted(path.rglob("*")) if p.is_file()]
    with open_archive(path) as archive:
        return [
            (info.filename, info.file_size)
            for info in sorted(archive.infolist(), key=lambda i: i.filename)
            if not info.filename.endswith("/")  # as is_dir() says, without its IndexError on an empty name
        ]


# zipfile inflates no more of a member than its central directory entry declares (file_size; what would follow is a
# CRC error), so a member declaring more than the limit is refused unread, in no time and no memory (a 2 MB archive
# may declare and hold 2 GiB). Members are still inflated a chunk at a time and counted while read, so the bound
# holds whatever inflates them. zipfile inflates bzip2 and lzma members without a bound on each step, so only stored
# and deflated members are read.
CHUNK = 1 << 20
# What zipfile raises reading a damaged member, found by make fuzz beyond BadZipFile: a bad CRC or a short stream
# (zlib.error, EOFError), a header offset before the file's start (OSError: invalid seek), a header it cannot
# unpack (struct.error), a method or version it does not know (NotImplementedError), a password (RuntimeError), an
# empty name where it looks at the last character (IndexError), a local name not in the UTF-8 its flag claims.
BROKEN_MEMBER = (
    UnicodeDecodeError,
    zipfile.BadZipFile,
    zlib.error,
    EOFError,
    OSError,
    struct.error,
    NotImplementedError,
    RuntimeError,
    IndexError,
)
BOUNDED_COMPRESSION = {zipfile.ZIP_STORED: "stored", zipfile.ZIP_DEFLATED: "deflated"}


class OversizedMember(ValueError):
    """A member holds more bytes than values.max_member_bytes (found while reading, whatever it declares)."""


class UnsupportedCompression(ValueError):
    """A zip member compressed by a method that is not inflated within a bound."""


class EncryptedMember(ValueError):
    """A zip member whose header sets the encrypted flag: zipfile would ask for a password the build never has."""


def _member_bytes(path: Path, archive: zipfile.ZipFile | None, name: str, limit: int) -> bytes:
    """A member's bytes, reading (inflating) at most `limit` + 1 of them: one more is an OversizedMember."""
    if archive is None:
        with (path / name).open("rb") as handle:
            data = handle.read(limit + 1)
    else:
        info = archive.getinfo(name)
        _readable(info, limit)
        read = bytearray()
        with archive.open(info) as member:
            while len(read) <= limit and (chunk := member.read(min(CHUNK, limit + 1 - len(read)))):
                read += chunk
        data = bytes(read)  # the unpickler reads bytes in place (a bytearray it would copy)
    if len(data) > limit:
        raise OversizedMember(f"more than {limit:,} bytes once read")
    return data


def _readable(info: zipfile.ZipInfo, limit: int) -> None:
    """Why a member is refused before it is inflated: encrypted, compressed by an unbounded method, or declaring more
    bytes than `limit`."""
    if info.flag_bits & 0x1:  # zip's "encrypted" bit: reading it raises RuntimeError("password required")
        raise EncryptedMember("the member is encrypted (a password is required)")
    if info.compress_type not in BOUNDED_COMPRESSION:
        raise UnsupportedCompression(
            f"compression method {info.compress_type} is not read (only {', '.join(BOUNDED_COMPRESSION.values())} "
            "members are inflated within a bound); recompress the archive with deflate"
        )
    if info.file_size > limit:
        raise OversizedMember(f"declares {info.file_size:,} bytes, more than {limit:,}")


def _stream_statistics(folder: Path, pattern: str | None) -> dict[str, dict]:
    """StreamID -> row of the BTS metadata CSV(s) beside the archives (empty when there is none)."""
    rows: dict[str, dict] = {}
    for csv_path in sorted(folder.glob(pattern)) if pattern else []:
        raw = read_strings(csv_path)
        _require(raw, ["StreamID", "Brick", "count"], "the BTS metadata CSV")
        for row in raw.table.to_pylist():
            rows[row["StreamID"]] = {**row, "_source": csv_path.name}
    return rows


def _bts_owner(resolver: Resolver, layout: BtsPickle, source: str, key: str) -> str:
    """The stream id a member feeds (its owner's key), or the member's own name when metadata cannot say."""
    site = resolver.site_of_key(key)
    return (site and resolver.stream_id_for(source, site, key, layout.stream_id)) or source


def _read_members(
    path: Path,
    rel: str,
    members: list,
    archive: zipfile.ZipFile | None,
    layout: BtsPickle,
    statistics: dict[str, dict],
    resolver: Resolver,
    scope: Scope,
) -> tuple[list[ReadFile], set[str]]:
    """The members this scope owns, loaded through the restricted unpickler; returns (reads, keys seen)."""
    reads, seen = [], set()
    for name, size in members:

        def refuse(reason: str, detail: str, member: str = name) -> None:
            resolver.rejected_members.append({"source": rel, "member": member, "reason": reason, "detail": detail})

        match = patterns.fullmatch(layout.member_pattern, name, "values.member_pattern")
        if not match:
            if scope.owns(f"{rel}:{name}"):
                refuse("unmatched_member", f"name does not match values.member_pattern {layout.member_pattern!r}")
            continue
        key, source = match.group("key"), f"{rel}:{name}"
        if not scope.owns(_bts_owner(resolver, layout, source, key)):
            seen.add(key)  # another batch reads it and reports it if it turns out missing
            continue

        series = _load_member(path, archive, name, size, key, layout, refuse)
        if series is None:
            continue
        try:
            site = resolver.site_for(source, {"key": key}, layout.site)
        except IngestError as exc:
            refuse("no_metadata", str(exc))
            continue
        seen.add(key)
        code = _codes(resolver, source, site, [key], layout.stream_id)[key]
        n = len(series.values)
        if key in statistics:
            _cross_check(resolver, source, key, n, statistics[key])
        valid = pl.Series(series.valid_ts)
        frame = pl.DataFrame(
            {
                "row": np.arange(1, n + 1, dtype=np.int64),
                "ts": np.asarray(series.timestamps_us, dtype=np.int64),
                "value": np.asarray(
                    series.values, dtype=np.float64
                ),  # numbers stay numbers (cleaning reads them as such)
            }
        ).with_columns(
            ts=pl.when(valid).then(pl.col("ts")),  # NaN, NaT, out-of-range times: each cell a reject
            ts_reason=pl.when(valid).then(None).otherwise(pl.lit(BAD_TIMESTAMP)),
        )
        sl = Slice(column="value", label="value", sid=code if code is not None else -1, unmapped=code is None)
        reads.append(ReadFile(source, frame, [sl], [], ["value"], n))
    return reads, seen


def _load_member(
    path: Path,
    archive: zipfile.ZipFile | None,
    name: str,
    size: int,
    key: str,
    layout: BtsPickle,
    refuse: Callable[[str, str], None],
) -> Series | None:
    """The series of a member through the restricted unpickler, or None when it is refused (and reported)."""
    if size > layout.max_member_bytes:
        refuse("oversized_member", f"{size:,} bytes > {layout.max_member_bytes:,}")
        return None
    try:
        series = load_series(_member_bytes(path, archive, name, layout.max_member_bytes), layout.max_member_bytes)
    except UnsafePickle as exc:
        refuse("unsafe_pickle", str(exc))
        return None
    except OversizedMember as exc:
        refuse("oversized_member", f"declared {size:,} bytes, {exc}")
        return None
    except UnsupportedCompression as exc:
        refuse("unsupported_compression", str(exc))
        return None
    except EncryptedMember as exc:
        refuse("encrypted_member", str(exc))
        return None
    except (ValueError, *BROKEN_MEMBER) as exc:  # a corrupt pickle, or a member zipfile cannot read
        refuse("corrupt_pickle", str(exc))
        return None
    if series.stream_id != key:
        refuse("stream_id_mismatch", f"member holds {series.stream_id!r}")
        return None
    return series


def _cross_check(resolver: Resolver, source: str, key: str, n: int, listed: dict) -> None:
    """A note where the metadata CSV's count or class of a stream disagrees with its member or its graph point."""
    point = resolver.catalog.points_by_key.get(key)
    if listed.get("count") and listed["count"].split(".")[0] != str(n):
        resolver.catalog.notes.append(f"{source}: {n} values, {listed['_source']} says {listed['count']}")
    if point is not None and listed.get("Brick") and listed["Brick"] != point.point_class:
        resolver.catalog.notes.append(
            f"{source}: class {point.point_class} in the graph, {listed['Brick']} in {listed['_source']}"
        )


def read_bts(path: Path, rel: str, mapping: CorpusMapping, resolver: Resolver, scope: Scope) -> list[ReadFile]:
    """One ReadFile per pickle member; refused or unreadable members are reported by name, the rest still build.

    The metadata CSV is cross-checked: a stream whose count or class disagrees gets a note, a listed stream
    without a member is reported like a missing column."""
    layout: BtsPickle = mapping.values
    statistics = _stream_statistics(path.parent, layout.metadata_csv)
    members = _members(path)
    with contextlib.ExitStack() as stack:
        archive = None if path.is_dir() else stack.enter_context(open_archive(path))  # opened once, not per member
        reads, seen = _read_members(path, rel, members, archive, layout, statistics, resolver, scope)
    if resolver.by_stream_key:
        for key in sorted(set(resolver.catalog.points_by_key) - seen):
            resolver.missing_columns.append(
                {"source": rel, "column": key, "point": resolver.catalog.points_by_key[key].entity_id or key}
            )
    for key in sorted(set(statistics) - seen - set(resolver.catalog.points_by_key)):
        resolver.missing_columns.append(
            {"source": statistics[key]["_source"], "column": key, "point": "listed, no member"}
        )
    return reads


READERS["bts_pickle"] = read_bts
