"""A parts location (`build --parts`) is an existing folder or a URL of a named scheme: anything else stops the build
with one line before it starts, and nothing is created, not even the folder it names (issue 44)."""

from __future__ import annotations

import os

import pytest
from click.testing import CliRunner

from pipeline.cli import main
from pipeline.core.errors import ConfigError
from pipeline.core.parts import check_location
from pipeline.core.resources import Resources
from tests.helpers import REPO

REFUSED = {
    "ftp://host/parts": "scheme 'ftp' is not one of",
    "zip://member::file.zip": "scheme 'zip' is not one of",
    "tar://member::file.tar": "scheme 'tar' is not one of",
    "github://owner:repo@main/": "scheme 'github' is not one of",
    "reference://": "scheme 'reference' is not one of",
    "memory://parts": "scheme 'memory' is not one of",
    "simplecache::file:///tmp": "scheme 'simplecache::file' is not one of",
    "S3://bucket": "scheme 'S3' is not one of",
    "s3://": "names no bucket",
    "file://": "names no folder",
    "": "is empty",
    " ": "is empty",
    "::": "does not exist",
    "relative/parts": "does not exist",
    "a\x00b": "not a usable path",
}


def _tree(root) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.mark.parametrize("location", sorted(REFUSED))
def test_a_bad_parts_location_is_one_line_and_creates_nothing(location, tmp_path, monkeypatch):
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)  # relative locations resolve here
    args = ["--root", str(REPO), "--artifacts", str(tmp_path / "art"), "build", "--corpus", "xai4heat"]
    result = CliRunner().invoke(
        main, [*args, "--until", "ingest", "--partitions", "3", "--workers", "2", "--parts", location]
    )
    message = result.output.strip()
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result.output
    assert message.startswith("error: parts location") and "\n" not in message, message
    assert REFUSED[location] in message
    assert _tree(work) == [] and not (tmp_path / "art").exists()


def test_an_absent_folder_is_refused_and_not_created(tmp_path):
    for location in (f"file://{tmp_path}/absent/x", str(tmp_path / "absent" / "x")):
        with pytest.raises(ConfigError, match=f"'{tmp_path}/absent/x' does not exist; create it first"):
            Resources(partitions=3, workers=2, parts=location)
    (tmp_path / "a file").write_text("not a folder", encoding="utf-8")
    with pytest.raises(ConfigError, match="is a file, not a folder"):
        check_location(f"file://{tmp_path}/a file")
    assert _tree(tmp_path) == ["a file"]


def test_existing_folders_and_named_schemes_are_kept(tmp_path, monkeypatch):
    (tmp_path / "parts").mkdir()
    monkeypatch.chdir(tmp_path)
    assert Resources(parts="parts").parts == str(tmp_path / "parts")  # absolute: workers start elsewhere
    assert check_location(f"file://{tmp_path}/parts") == f"file://{tmp_path}/parts"
    assert check_location("file://parts") == f"file://{tmp_path}/parts"
    for location in ("s3://bucket/parts", "s3://bucket"):  # s3fs is a dev dependency; nothing is reached yet
        assert check_location(location) == location
    assert os.listdir(tmp_path / "parts") == []
