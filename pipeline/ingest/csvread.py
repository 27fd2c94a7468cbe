"""Read a delimited text file as strings, keeping every record accounted for.

Each record gets its 1-based record number (the header, if any, is record 1; equal to the line number
unless a quoted field spans lines: quoted fields may hold line breaks). Records with the wrong number of fields,
and records holding a cell over MAX_CELL_BYTES, are returned separately, never dropped silently.
"""

from __future__ import annotations

import functools
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from pipeline.core.errors import IngestError

# A cell longer than this is no telemetry reading, name or time (a quoted field left open, a file pasted into a cell):
# its record is set aside as oversized, so no reader ever holds or parses it as a value.
MAX_CELL_BYTES = 64 << 10
PREVIEW = 200  # characters of an oversized cell kept in its reject


@dataclass
class RawTable:
    path: Path
    header: list[str]
    table: pa.Table  # every column as string, raw text kept ("" for an empty cell)
    rows: np.ndarray  # record number of each table row
    malformed: list[tuple[int, str]]  # (record number, text) of records with a wrong field count
    oversized: list[tuple[int, str]] = field(default_factory=list)  # (record number, what) of records with a cell
    # over MAX_CELL_BYTES, left out of `table`

    @property
    def set_aside(self) -> list[tuple[int, str, str]]:
        """The records not in `table`, in file order: (record number, text, the reason each of its cells has)."""
        return sorted(
            [(n, text, "malformed_row") for n, text in self.malformed]
            + [(n, text, "oversized_cell") for n, text in self.oversized]
        )

    @property
    def records(self) -> int:
        """Every data record of the file: those in `table` and those set aside."""
        return self.table.num_rows + len(self.malformed) + len(self.oversized)


def _decode_check(path: Path, data: bytes, encoding: str) -> bytes:
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise IngestError(
            f"{path}: line {line}: bytes {data[exc.start : exc.end]!r} are not valid {encoding}; "
            "re-encode the file as UTF-8 or declare its encoding in values.encoding"
        ) from exc
    except LookupError as exc:
        raise IngestError(f"{path}: unknown encoding {encoding!r} in values.encoding") from exc
    return data if encoding.replace("-", "").lower() == "utf8" else text.encode("utf-8")


def _nul_check(path: Path, data: bytes) -> None:
    at = data.find(b"\x00")
    if at >= 0:
        line = data.count(b"\n", 0, at) + 1
        raise IngestError(
            f"{path}: line {line}: holds NUL bytes, so it is not delimited text (a binary file, one cut by a "
            'crash, or UTF-16); restore the file, or declare values.encoding = "utf-16" if it is UTF-16'
        )


def _header(path: Path, data: bytes, delimiter: str, columns: list[str] | None) -> list[str]:
    """The first record's names, or `columns` in their place (as many as the header has)."""
    end = data.find(b"\n")
    first_line = (data if end < 0 else data[:end]).rstrip(b"\r").decode("utf-8")
    if not first_line.strip():
        raise IngestError(
            f"{path}: line 1 is blank, where the header should be; remove the blank line(s) before the header "
            "(or set header = false with values.columns if the file has none)"
        )
    try:
        header = next(
            iter(
                pacsv.read_csv(
                    pa.py_buffer(first_line.encode("utf-8") + b"\n"),
                    parse_options=pacsv.ParseOptions(delimiter=delimiter),
                    read_options=pacsv.ReadOptions(autogenerate_column_names=True),
                ).to_pylist()
            ),
            {},
        ).values()
    except pa.ArrowInvalid as exc:
        raise IngestError(
            f"{path}: line 1: the header cannot be parsed as delimited text ({exc}); check values.delimiter "
            "and the header's quotes"
        ) from exc
    header = ["" if name is None else str(name) for name in header]  # an empty name reads as null (a pandas index)
    if columns is not None:
        if len(columns) != len(header):
            raise IngestError(
                f"{path}: line 1: the header has {len(header)} columns ({', '.join(header)}), values.columns "
                f"names {len(columns)}; name every column in order, or set header = false if line 1 is data"
            )
        return list(columns)
    dupes = sorted({name for name in header if header.count(name) > 1})
    if dupes:
        raise IngestError(
            f"{path}: line 1: duplicate column names {', '.join(dupes)}; rename them in the header "
            "or name the columns in values.columns"
        )
    return header


def read_strings(
    path: Path,
    delimiter: str = ",",
    encoding: str = "utf-8",
    header: bool = True,
    columns: list[str] | None = None,
    data: bytes | None = None,
) -> RawTable:
    """Read the whole file; a missing, empty or undecodable file is an IngestError naming it.

    Without a header (`header=False`) every record is data, named by `columns`, and the first record is row 1.
    `data`: the file's bytes already read (an archive member; `path` then names it in messages, archive:member)."""
    if data is None:
        if not path.is_file():
            raise IngestError(f"{path}: file not found; restore it or fix values.files in the corpus mapping")
        data = path.read_bytes()
    data = _decode_check(path, data, encoding)
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    if not data.strip():
        raise IngestError(
            f"{path}: file is empty; it needs "
            + ("a header row and " if header else "")
            + "data rows (restore it or remove it)"
        )
    _nul_check(path, data)
    if header:
        names, first = _header(path, data, delimiter, columns), 2
    elif columns:
        names, first = list(columns), 1
    else:
        raise IngestError(f"{path}: header = false needs values.columns, the names of the columns in order")
    header = names

    table, malformed = _parse(path, data, delimiter, header, first)
    bad = sorted(malformed)
    rows = np.arange(first, table.num_rows + first, dtype=np.int64)
    if bad:
        # Shift each good record's number past the malformed records before it.
        bad_numbers = np.array([number for number, _ in bad], dtype=np.int64)
        rows = rows + np.searchsorted(bad_numbers - np.arange(len(bad_numbers)), rows, side="right")
    table, rows, oversized = _set_aside_oversized(table, rows)
    return RawTable(path=path, header=header, table=table, rows=rows, malformed=bad, oversized=oversized)


def _parse(
    path: Path, data: bytes, delimiter: str, names: list[str], first: int
) -> tuple[pa.Table, list[tuple[int, str]]]:
    """The records as strings (quoted fields may hold line breaks) and the malformed ones; one IngestError line when
    the text cannot be parsed at all."""
    malformed: list[tuple[int | None, str]] = []

    def on_invalid(row: pacsv.InvalidRow) -> str:
        malformed.append((row.number, row.text))
        return "skip"

    def parse(threads: bool, block_size: int) -> pa.Table:
        malformed.clear()
        return pacsv.read_csv(
            pa.py_buffer(data),
            read_options=pacsv.ReadOptions(
                use_threads=threads, column_names=names, skip_rows=first - 1, block_size=block_size
            ),
            parse_options=pacsv.ParseOptions(
                delimiter=delimiter, invalid_row_handler=on_invalid, newlines_in_values=True
            ),
            convert_options=pacsv.ConvertOptions(
                column_types={name: pa.string() for name in names},
                strings_can_be_null=False,
                quoted_strings_can_be_null=False,
                null_values=[],
            ),
        )

    block, threads = 1 << 20, True
    while True:
        try:
            table = parse(threads, block)
        except pa.ArrowInvalid as exc:
            if "straddl" in str(exc) and block <= len(data):  # a record longer than a block: the file as one block
                block, threads = len(data) + 1, False
                continue
            raise IngestError(
                f"{path}: cannot be parsed as delimited text ({exc}); check values.delimiter and the file's quotes"
            ) from exc
        if threads and any(number is None for number, _ in malformed):
            threads = False  # record numbers are only known single-threaded
            continue
        return table, _numbered(path, malformed)


def _numbered(path: Path, malformed: list[tuple[int | None, str]]) -> list[tuple[int, str]]:
    """The malformed records with their numbers. With quoted fields over lines, pyarrow (26) may also report some
    records a second time without a number, even single-threaded: those are dropped when each is reported with one."""
    numbered = [(n, text) for n, text in malformed if n is not None]
    unnumbered = Counter(text for n, text in malformed if n is None)
    if unnumbered - Counter(text for _, text in numbered):
        raise IngestError(
            f"{path}: {unnumbered.total()} malformed records have no record number; check the file's quotes"
        )
    return numbered


def _set_aside_oversized(table: pa.Table, rows: np.ndarray) -> tuple[pa.Table, np.ndarray, list[tuple[int, str]]]:
    """The records with a cell over MAX_CELL_BYTES, out of the table: (record number, which cell and its start)."""
    lengths = [pc.binary_length(column) for column in table.columns]
    # The longest cell first: a comparison with a Python number would make pyarrow import pandas (0.3 s).
    if not any((pc.max(length).as_py() or 0) > MAX_CELL_BYTES for length in lengths):
        return table, rows, []
    over = [pc.greater(length, MAX_CELL_BYTES) for length in lengths]
    mask = functools.reduce(pc.or_, over)
    oversized = []
    for index in np.flatnonzero(mask.to_numpy(zero_copy_only=False)):
        name, cell = next(
            (n, c[index].as_py())
            for n, c, o in zip(table.column_names, table.columns, over, strict=True)
            if o[index].as_py()
        )
        oversized.append((int(rows[index]), f"{name!r} holds {len(cell.encode()):,} bytes: {cell[:PREVIEW]}"))
    keep = pc.invert(mask)
    return table.filter(keep), rows[keep.to_numpy(zero_copy_only=False)], oversized
