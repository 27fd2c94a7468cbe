"""A release folder on its own: copied, made read-only, played, served over MCP from elsewhere, verified unchanged."""

from __future__ import annotations

import json
import os
import shutil
import stat
import sys
from pathlib import Path

import anyio
import pytest
from click.testing import CliRunner
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from pipeline.cli import main
from pipeline.core.checksums import sha256_file


def snapshot(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): sha256_file(p) for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture
def copy(real_artifacts, tmp_path):
    """Only a copy of the xai4heat release, read-only, in a folder of its own (as a hub download would be)."""
    folder = tmp_path / "download" / "xai4heat"
    shutil.copytree(real_artifacts / "xai4heat" / "release", folder)
    (folder / ".gitattributes").write_text("*.parquet filter=lfs\n")  # what hubs add to downloads is allowed
    for path in [folder, *folder.rglob("*")]:
        path.chmod(path.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
    yield folder
    for path in [folder, *folder.rglob("*")]:
        path.chmod(path.stat().st_mode | stat.S_IWUSR)


def cli(cwd: Path, *args: str):
    previous = os.getcwd()
    os.chdir(cwd)
    try:
        return CliRunner().invoke(main, list(args))
    finally:
        os.chdir(previous)


def test_a_copied_release_plays_scores_and_verifies_on_its_own(copy, tmp_path):
    before = snapshot(copy)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = tmp_path / "traces" / "oracle.jsonl"
    out.parent.mkdir()
    cache = tmp_path / "cache"
    result = cli(
        elsewhere,
        "run",
        "--release",
        str(copy),
        "--cache-dir",
        str(cache),
        "--split",
        "test",
        "--agent",
        "oracle",
        "--out",
        str(out),
        "--json",
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["accomplished_rate"] == 1.0  # the store's loading is said on stderr
    assert result.stderr.startswith("info: loaded the tool store of "), result.stderr
    assert json.loads(out.read_text().split("\n")[0])["episode_set"] == "release"
    scored = cli(elsewhere, "score", str(out), "--release", str(copy), "--json")
    assert scored.exit_code == 0 and json.loads(scored.output)["summaries"][0]["accomplished_rate"] == 1.0, (
        scored.output
    )
    assert list(cache.glob("xai4heat-*/store-*.duckdb"))  # the store went to the cache, outside the release
    evaluated = cli(
        elsewhere, "evaluate", "--release", str(copy), "--cache-dir", str(cache), "--trace", str(out), "--json"
    )
    assert evaluated.exit_code == 0 and json.loads(evaluated.output)["mean_final"] == 1.0, evaluated.output
    verified = cli(elsewhere, "verify", "--release", str(copy))
    assert verified.exit_code == 0, verified.output
    assert snapshot(copy) == before


def test_a_damaged_table_is_refused_before_the_store_is_loaded(real_artifacts, tmp_path):
    folder = tmp_path / "release"
    shutil.copytree(real_artifacts / "xai4heat" / "release", folder)
    table = folder / "store" / "sites.parquet"
    table.write_bytes(table.read_bytes()[:-10] + b"0123456789")
    result = cli(
        tmp_path,
        "run",
        "--release",
        str(folder),
        "--cache-dir",
        str(tmp_path / "cache"),
        "--split",
        "test",
        "--agent",
        "oracle",
        "--out",
        str(tmp_path / "t.jsonl"),
    )
    assert result.exit_code == 1 and "sites.parquet: does not match release.json" in result.output, result.output
    assert not list((tmp_path / "cache").rglob("store.duckdb"))


async def _serve(copy: Path, cache: Path, cwd: Path):
    exe = Path(sys.executable).with_name("telemetry-bench")
    params = StdioServerParameters(
        command=str(exe), args=["serve", "--release", str(copy), "--cache-dir", str(cache)], cwd=str(cwd)
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        first = await session.call_tool("list_points", {"site": "L8"})
        second = await session.call_tool("inspect_quality", {"stream_id": "$c1.points[0].stream_id"})
    return first, second


def test_serve_a_copied_release_from_another_folder(copy, tmp_path):
    before = snapshot(copy)
    elsewhere = tmp_path / "host-folder"
    elsewhere.mkdir()
    first, second = anyio.run(_serve, copy, tmp_path / "cache", elsewhere)
    assert not first.is_error and first.structured_content["points"][0]["site_id"] == "L8", first
    assert (
        not second.is_error
        and second.structured_content["stream_id"] == first.structured_content["points"][0]["stream_id"]
    ), second
    assert snapshot(copy) == before


def test_tools_and_agent_views_come_from_a_release_alone(copy, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    cache = str(tmp_path / "cache")
    before = snapshot(copy)
    listed = cli(elsewhere, "tools", "--release", str(copy), "--cache-dir", cache, "--json")
    assert listed.exit_code == 0 and json.loads(listed.stdout)["tools"], listed.output
    episode = json.loads((copy / "test.jsonl").read_text().splitlines()[0])
    stream = episode["evidence_stream_ids"][0]
    called = cli(
        elsewhere,
        "tool",
        "inspect_quality",
        "--release",
        str(copy),
        "--cache-dir",
        cache,
        "--args",
        json.dumps({"stream_id": stream}),
    )
    assert called.exit_code == 0 and json.loads(called.output)["stream_id"] == stream, called.output
    viewed = cli(
        elsewhere,
        "inspect",
        "episode",
        episode["id"],
        "--release",
        str(copy),
        "--cache-dir",
        cache,
        "--agent-view",
        "--json",
    )
    assert viewed.exit_code == 0, viewed.output
    views = json.loads(viewed.output)
    assert views["corpus"] == "xai4heat" and views["turns"][0]["messages"][0]["role"] == "user"
    assert "gold" not in viewed.output and episode["hidden_instruction"] not in viewed.output
    assert snapshot(copy) == before  # the release is only read
