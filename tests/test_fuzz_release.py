"""Damaged and rewritten release folders (issue 44): a file of a copied release truncated, replaced by garbage or by
deeply nested JSON, a row of it replaced, or a byte flipped; then, as a careful forger would, its digests recomputed
(with or without release_version and the release digest). `verify --release`, `run --release` and `serve --release`
each end in success or one `error:` line, never a traceback; `verify --expect` with the genuine digest refuses every
change; and the store cache they share is never poisoned: the genuine release plays on its own tables afterwards. Few
examples in make test, many in make fuzz."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner, Result
from hypothesis import given
from hypothesis import strategies as st

from pipeline.cli import main
from tests.helpers import fuzz_settings, rehash_release, tool_results

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
