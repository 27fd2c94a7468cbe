"""Damaged and rewritten release folders (issue 44): a file of a copied release truncated, replaced by garbage or by
deeply nested JSON, a row of it replaced, or a byte flipped; then, as a careful forger would, its digests recomputed
(with or without release_version and the release digest). `verify --release`, `run --release` and `serve --release`
each end in success or one `error:` line, never a traceback; `verify --expect` with the genuine digest refuses every
change; and the store cache they share is never poisoned: the genuine release plays on its own tables afterwards. And
store tables holding absurd values (NaN, infinities, nulls, huge texts, lone surrogates, times out of range, rows
doubled, dropped or reversed, columns of other types, extra columns): refused at load in one line, or every tool's
result is JSON. Few examples in make test, many in make fuzz."""

from __future__ import annotations

import json
import math
import shutil

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from click.testing import CliRunner, Result
from hypothesis import given
from hypothesis import strategies as st

from pipeline.cli import main
from pipeline.core.errors import ReleaseError
from pipeline.release.playable import Release
from pipeline.store.reader import KEYS
from pipeline.tools import registry
from tests.helpers import (
    SMALLEST,
    every_tool_call,
    fuzz_settings,
    rehash_release,
    rewrite_table,
    store_table,
    tool_results,
)

RELEASE_CORPUS = SMALLEST  # each example verifies, plays or loads a whole release: the smallest release

MANIFESTS = ("release.json", "manifest.json")  # the digests themselves: changed, never rewritten after


def outcome(result: Result, command: str) -> None:
    """Success, or one `error:` line from the CLI's handler: never an exception."""
    assert result.exit_code in (0, 1), f"{command}: exit {result.exit_code}\n{result.output}"
    if result.exit_code == 1:
        assert isinstance(result.exception, SystemExit), f"{command}: {result.exception!r}\n{result.output}"
        assert result.output.strip().splitlines()[-1].startswith("error: "), f"{command}: {result.output}"
    assert "Traceback" not in result.output, f"{command}: {result.output}"


def nested(depth: int) -> bytes:
    return b'{"slots": ' + b"[" * depth + b"]" * depth + b"}"


@st.composite
def mutations(draw, original: bytes, jsonl: bool) -> bytes:
    """Another content for a file: truncated, garbage, deeply nested JSON, one row replaced, or one byte flipped."""
    kinds = ["truncate", "garbage", "nested", "flip"] + (["row"] * 2 if jsonl else [])
    kind = draw(st.sampled_from(kinds), label="kind")
    if kind == "truncate":
        return original[: draw(st.integers(0, max(0, len(original) - 1)), label="length")]
    if kind == "garbage":
        return draw(st.binary(min_size=0, max_size=2048), label="garbage")
    if kind == "nested":
        return nested(draw(st.sampled_from([65, 1000, 100_000]), label="depth"))
    if kind == "flip":
        data = bytearray(original or b"\0")
        offset = draw(st.integers(0, len(data) - 1), label="offset")
        data[offset] ^= draw(st.integers(1, 255), label="xor")
        return bytes(data)
    rows = original.split(b"\n")
    index = draw(st.integers(0, max(0, len(rows) - 2)), label="row")
    rows[index] = draw(
        st.sampled_from(
            [b"", b"{", b"[]", b'{"id": "x"}', b"\xff\xfe", nested(5000), rows[index][: len(rows[index]) // 2]]
        ),
        label="new row",
    )
    return b"\n".join(rows)


@pytest.mark.fuzz
def test_damaged_and_rewritten_releases_end_in_success_or_one_line(release, tmp_path):
    files = sorted(json.loads((release / "release.json").read_text())["files"]) + list(MANIFESTS)
    originals = {name: (release / name).read_bytes() for name in files}
    trusted = json.loads(originals["release.json"])["release_digest"]
    cache = tmp_path / "cache"  # shared by every example: a forged store must never serve the genuine release
    out = tmp_path / "trace.jsonl"

    def restore() -> None:
        for name, data in originals.items():
            (release / name).write_bytes(data)

    @fuzz_settings(6, 120)
    @given(st.data())
    def mutate(data):
        name = data.draw(st.sampled_from(files), label="file")
        changed = data.draw(mutations(originals[name], name.endswith(".jsonl")), label="content")
        (release / name).write_bytes(changed)
        rewritten = name not in MANIFESTS and data.draw(st.booleans(), label="digests recomputed")
        try:
            if rewritten:
                rehash_release(release, versions=data.draw(st.booleans(), label="versions too"))
            verified = CliRunner().invoke(main, ["verify", "--release", str(release), "--expect", trusted])
            outcome(verified, "verify")
            if changed != originals[name]:
                assert verified.exit_code == 1, f"{name} changed, yet verify --expect passed"
            run = ["run", "--release", str(release), "--cache-dir", str(cache), "--split", "test", "--agent"]
            outcome(CliRunner().invoke(main, [*run, "oracle", "--limit", "2", "--out", str(out)]), "run")
            served = ["serve", "--release", str(release), "--cache-dir", str(cache)]
            outcome(CliRunner().invoke(main, served, input=""), "serve")
        finally:
            restore()

    mutate()
    genuine = CliRunner().invoke(main, ["verify", "--release", str(release), "--expect", trusted])
    assert genuine.exit_code == 0, genuine.output
    played = {}
    for where in (cache, tmp_path / "fresh"):  # the shared cache, then one of its own
        trace = tmp_path / f"{where.name}.jsonl"
        run = ["run", "--release", str(release), "--cache-dir", str(where), "--split", "test", "--agent", "oracle"]
        result = CliRunner().invoke(main, [*run, "--out", str(trace)])
        assert result.exit_code == 0, result.output
        played[where.name] = tool_results(trace)
    assert played["cache"] == played["fresh"]


FLOATS = [math.nan, math.inf, -math.inf, 1e308, -1e308, 1e16, 1e15, -0.0, 5e-324, 1.5, -1.0, None]
INTEGERS = [None, -1, 0, 1, 24, 2**53 + 1, 2**62, -(2**63), 2**63 - 1, 1_500_000_000_000_000]
TEXTS = [None, "", "nowhere", "x" * (1 << 20), "\x00", "é" * 600, "year", "excellent", "std_ddof", "L8"]


def _values(kind: pa.DataType) -> list:
    if pa.types.is_floating(kind):
        return FLOATS
    if pa.types.is_integer(kind):  # the absurd values the column's type can hold (an int32 cannot hold 2**53 + 1)
        signed = pa.types.is_signed_integer(kind)
        low, high = (
            (-(2 ** (kind.bit_width - 1)), 2 ** (kind.bit_width - 1) - 1) if signed else (0, 2**kind.bit_width - 1)
        )
        return [v for v in INTEGERS if v is None or low <= v <= high]
    if pa.types.is_boolean(kind):
        return [None, True, False]
    return TEXTS + ["\ud800"]  # a lone surrogate: written as the bytes no UTF-8 writer writes


def _column(values: list, kind: pa.DataType) -> pa.Array:
    """An Arrow column of the values; a text with a lone surrogate becomes its surrogate-pass bytes, as text."""
    if pa.types.is_string(kind) and any(isinstance(v, str) and "\ud800" in v for v in values):
        raw = pa.array([None if v is None else v.encode("utf-8", "surrogatepass") for v in values], type=pa.binary())
        return pa.Array.from_buffers(pa.string(), len(raw), raw.buffers(), null_count=raw.null_count)
    return pa.array(values, type=kind)


@st.composite
def store_mutations(draw, tables: dict[str, pa.Table]) -> tuple[str, pa.Table, int]:
    """A store table with hostile contents (and the row changed): a cell set to an absurd value, a row doubled or
    dropped, the rows reversed, a column of another type, or an extra column."""
    name = draw(st.sampled_from(sorted(tables)), label="table")
    data = tables[name]
    kind = draw(st.sampled_from(["cell"] * 4 + ["double", "drop", "reverse", "retype", "extra"]), label="kind")
    row = draw(st.integers(0, max(0, len(data) - 1)), label="row")
    if kind == "double":
        return name, pa.concat_tables([data, data.slice(row, 1)]), row
    if kind == "drop":
        return name, pa.concat_tables([data.slice(0, row), data.slice(row + 1)]), max(0, row - 1)
    if kind == "reverse":
        return name, data.take(list(range(len(data) - 1, -1, -1))), row
    if kind == "extra":
        return name, data.append_column("extra", pa.array([0] * len(data))), row
    column = draw(st.sampled_from(data.column_names), label="column")
    index = data.schema.get_field_index(column)
    if kind == "retype":
        other = draw(st.sampled_from([pa.string(), pa.float32(), pa.int32(), pa.timestamp("us")]), label="type")
        try:
            return name, data.set_column(index, column, pc.cast(data.column(column), other)), row
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return name, data.set_column(index, column, pa.nulls(len(data), other)), row
    values = data.column(column).to_pylist()
    if values:
        values[row] = draw(st.sampled_from(_values(data.schema.field(column).type)), label="value")
    return name, data.set_column(index, column, _column(values, data.schema.field(column).type)), row


@pytest.mark.fuzz
def test_hostile_store_values_end_in_one_line_or_json_results(release, tmp_path):
    """A store table rewritten with absurd values (its digests recomputed, so verify passes): `run --release` and
    `tool --release` end in success or one `error:` line, and once a store is loaded, every tool call on it returns a
    JSON result (never raises, never NaN or an infinity)."""
    originals = {p.name: p.read_bytes() for p in release.iterdir() if p.is_file()}
    tables = {name: store_table(release, name) for name in KEYS}
    table_bytes = {name: (release / "store" / f"{name}.parquet").read_bytes() for name in KEYS}
    out = tmp_path / "trace.jsonl"
    examples = iter(range(1_000_000))

    @fuzz_settings(8, 150)
    @given(st.data())
    def mutate(data):
        cache = tmp_path / f"cache-{next(examples)}"
        name, changed, row = data.draw(store_mutations(tables), label="store")
        rewrite_table(release, name, changed)
        try:
            run = ["run", "--release", str(release), "--cache-dir", str(cache), "--split", "test", "--agent"]
            outcome(CliRunner().invoke(main, [*run, "oracle", "--limit", "2", "--out", str(out)]), "run")
            try:
                store = Release(release, cache).store()
            except ReleaseError:
                return  # refused at load in one line (the CLI's handler shows it)
            try:
                streams = {*list(store.streams)[:2]}
                if "stream_id" in changed.column_names and row < len(changed):
                    streams.add(str(changed.column("stream_id")[row].as_py()))  # the stream of the row changed
                for stream in sorted(streams):
                    for tool, arguments in every_tool_call(store, stream):
                        json.dumps(registry.call(store, tool, arguments), allow_nan=False)
            finally:
                store.close()
        finally:
            for file, content in originals.items():
                (release / file).write_bytes(content)
            for table, content in table_bytes.items():
                (release / "store" / f"{table}.parquet").write_bytes(content)
            shutil.rmtree(cache, ignore_errors=True)

    mutate()
