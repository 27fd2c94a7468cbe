"""A release folder rewritten whole, its digests recomputed so that every file matches release.json: `run` and
`serve --release` refuse what they cannot read in one line (never a traceback), and the store cache is keyed by the
release's full content and checked before use, so that no release is played on another's store (issue 44)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from click.testing import CliRunner, Result

from pipeline.cli import main
from tests.helpers import SMALLEST, one_error_line, poisoned_copy, rehash_release, tool_results

RELEASE_CORPUS = SMALLEST  # each case plays or serves a release, loading its store: the smallest release


def cli(*args: str) -> Result:
    return CliRunner().invoke(main, [str(a) for a in args])


def play(folder: Path, cache: Path, out: Path, agent: str = "oracle") -> Result:
    return cli("run", "--release", folder, "--cache-dir", cache, "--split", "test", "--agent", agent, "--out", out)


def serve(folder: Path, cache: Path) -> Result:
    return cli("serve", "--release", folder, "--cache-dir", cache)


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def test_a_broken_row_is_one_line(release, tmp_path):
    path = release / "test.jsonl"
    rows = path.read_text().splitlines(keepends=True)
    rows[3] = '{"id": "broken"\n'
    path.write_text("".join(rows))
    rehash_release(release)
    one_error_line(play(release, tmp_path / "cache", tmp_path / "t.jsonl"), "test.jsonl: row 4: not an episode")


def test_a_deeply_nested_simulator_json_is_one_line(release, tmp_path):
    (release / "simulator.json").write_text('{"slots": ' + nested(100_000) + "}")
    rehash_release(release)
    one_error_line(play(release, tmp_path / "cache", tmp_path / "t.jsonl"), "simulator.json: not the simulator's")
    (release / "simulator.json").write_text('{"slots": {"site": [1, 2]}}')  # JSON, but not phrases
    rehash_release(release)
    one_error_line(play(release, tmp_path / "cache", tmp_path / "t.jsonl"), "simulator.json: not the simulator's")


def test_a_deeply_nested_or_huge_release_json_is_one_line(release, tmp_path):
    path = release / "release.json"
    text = path.read_text().rstrip()
    path.write_text(text[:-1] + ', "x": ' + nested(100_000) + "}\n")
    for result in (play(release, tmp_path / "cache", tmp_path / "t.jsonl"), serve(release, tmp_path / "cache")):
        one_error_line(result, "release.json: not a release manifest", "nested deeper than")
    with path.open("r+b") as handle:
        handle.truncate(100 << 20)  # sparse: past what any release.json holds, never read whole
    one_error_line(serve(release, tmp_path / "cache"), "release.json: not a release manifest", "larger than")


def test_a_store_table_that_is_not_parquet_is_one_line(release, tmp_path):
    (release / "store" / "sites.parquet").write_bytes(b"not a parquet file, but its digest is in release.json")
    rehash_release(release)
    cache = tmp_path / "cache"
    for result in (play(release, cache, tmp_path / "t.jsonl"), serve(release, cache)):
        one_error_line(result, "store/sites.parquet: not a readable Parquet table")
    assert not list(cache.rglob("*.duckdb")), "a half-loaded store was left in the cache"


def test_a_parquet_table_of_other_columns_is_refused(release, tmp_path):
    pq.write_table(pa.table({"site_id": [1, 2], "other": ["a", "b"]}), release / "store" / "sites.parquet")
    rehash_release(release)
    one_error_line(serve(release, tmp_path / "cache"), "store/sites.parquet: not the store's sites table")


def test_two_releases_of_one_version_never_share_a_cache_entry(release, tmp_path):
    hostile = poisoned_copy(release, tmp_path / "hostile")
    versions = [json.loads((f / "release.json").read_text())["release_version"] for f in (release, hostile)]
    assert versions[0] == versions[1]
    shared, fresh = tmp_path / "shared", tmp_path / "fresh"
    assert play(hostile, shared, tmp_path / "hostile.jsonl").exit_code == 0  # played first: its store is cached
    assert play(release, shared, tmp_path / "after.jsonl").exit_code == 0
    assert play(release, fresh, tmp_path / "alone.jsonl").exit_code == 0
    genuine = tool_results(tmp_path / "alone.jsonl")
    assert tool_results(tmp_path / "hostile.jsonl") != genuine  # the poison shows in the results
    assert tool_results(tmp_path / "after.jsonl") == genuine
    assert len(list(shared.glob(f"{SMALLEST}-*/store-*.duckdb"))) == 2  # one entry per content


def test_a_damaged_or_swapped_cache_entry_is_loaded_again(release, tmp_path):
    hostile = poisoned_copy(release, tmp_path / "hostile")
    cache = tmp_path / "cache"
    assert play(release, cache, tmp_path / "first.jsonl").exit_code == 0
    genuine = tool_results(tmp_path / "first.jsonl")
    assert play(hostile, tmp_path / "other", tmp_path / "hostile.jsonl").exit_code == 0
    (forged,) = (tmp_path / "other").glob(f"{SMALLEST}-*/store-*.duckdb")
    for replacement in (b"garbage" * 1000, forged.read_bytes()):  # a damaged file; another release's store
        (entry,) = cache.glob(f"{SMALLEST}-*/store-*.duckdb")
        entry.chmod(0o644)
        entry.write_bytes(replacement)
        result = play(release, cache, tmp_path / "again.jsonl")
        assert result.exit_code == 0, result.output
        assert tool_results(tmp_path / "again.jsonl") == genuine
