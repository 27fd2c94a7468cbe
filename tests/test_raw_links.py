"""A raw corpus is what its folder holds: a file symlink under data/raw/<corpus> that resolves outside it is refused in
one line (the file walk never enters a linked folder either); a link to a file inside the folder is read."""

from __future__ import annotations

import pytest

from pipeline.core.errors import ChecksumError
from tests.helpers import ingest, make_workspace, real_lines, xai_config

BODY = "\n".join(real_lines("xai4heat/xai4heat_scada_L4.csv", range(36000, 36040))) + "\n"


def test_a_file_symlink_to_outside_the_corpus_folder_is_one_error_line(tmp_path):
    ws = make_workspace(tmp_path / "root", "xai4heat", xai_config(held_out_sites="[]"), {})
    outside = tmp_path / "elsewhere.csv"
    outside.write_text(BODY, encoding="utf-8")
    (ws.root / "data" / "raw" / "xai4heat" / "xai4heat_scada_L4.csv").symlink_to(outside)
    with pytest.raises(
        ChecksumError, match=r"xai4heat_scada_L4\.csv: a symlink to .*elsewhere\.csv, outside"
    ) as caught:
        ingest(ws, "xai4heat")
    assert "\n" not in str(caught.value)


def test_a_file_symlink_inside_the_corpus_folder_is_read(tmp_path):
    ws = make_workspace(tmp_path, "xai4heat", xai_config(held_out_sites="[]"), {"kept/copy.txt": BODY})
    raw = ws.root / "data" / "raw" / "xai4heat"
    (raw / "xai4heat_scada_L4.csv").symlink_to(raw / "kept" / "copy.txt")
    assert ingest(ws, "xai4heat")["observations"].height > 0
