"""Random parts locations (`build --parts`, issue 44): each is refused with one ConfigError line or kept as a valid
location (an existing absolute folder, or a URL of a named scheme), and nothing is created outside the test's own
folder, not even for a location that names another. Few examples in make test, many in make fuzz."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipeline.core.errors import ConfigError
from pipeline.core.parts import SCHEMES, join, read_part, remove_parts, stage_parts, write_part
from pipeline.core.resources import Resources
from tests.helpers import fuzz_settings

PIECES = st.sampled_from(
    [
        *SCHEMES,
        "ftp",
        "zip",
        "tar",
        "github",
        "reference",
        "memory",
        "simplecache",
        "http",
        "S3",
        "://",
        "::",
        ":",
        "/",
        "//",
        ".",
        "..",
        "~",
        "parts",
        "absent",
        "bucket",
        "@",
        "?",
        "#",
        "%2F",
        " ",
        "\x00",
        "\udcff",
        "é",
        "\n",
        "\\",
    ]
)
LOCATIONS = st.lists(PIECES, max_size=8).map("".join) | st.text(max_size=30)


def _tree(root: Path) -> set[str]:
    return {str(p) for p in root.rglob("*")}


def _outcome(location: str, home: Path) -> None:
    try:
        parts = Resources(parts=location).parts
    except ConfigError as exc:
        assert str(exc).startswith("parts location") and "\n" not in str(exc), str(exc)
        return
    scheme = parts.split("://", 1)[0] if "://" in parts else None
    assert scheme is None or scheme in SCHEMES, parts
    if scheme in (None, "file"):
        folder = Path(parts.removeprefix("file://"))
        assert folder.is_absolute() and folder.is_dir(), parts
        if folder == home or home in folder.parents:  # a part written and removed there leaves nothing behind
            where = join(stage_parts(home / "stage", parts, "ingest"), "b0", "rejects")
            write_part(pa.table({"x": [1]}), where)
            assert read_part(where).num_rows == 1
            remove_parts(stage_parts(home / "stage", parts, "ingest"))


@pytest.mark.fuzz
def test_random_parts_locations_are_refused_in_one_line_or_valid(monkeypatch):
    home = Path(tempfile.mkdtemp()).resolve()  # under the test's own temporary folder (conftest)
    (home / "parts").mkdir()
    monkeypatch.chdir(home)
    root = set(os.listdir("/"))

    @fuzz_settings(60, 2000)
    @given(LOCATIONS)
    def locations(location):
        before = _tree(home)
        _outcome(location, home)
        assert _tree(home) == before and set(os.listdir("/")) == root

    for location in ("parts", f"file://{home}/parts", f"{home}/parts/..", "s3://bucket/parts", "file:///absent/x"):
        _outcome(location, home)
    locations()
