"""A raw corpus is what its folder holds: a file symlink under data/raw/<corpus> that resolves outside it is refused in
one line, and so is a linked folder inside it (the file walk would not enter it); a link to a file inside the folder
is read."""

from __future__ import annotations

import pytest

from pipeline.core.errors import ChecksumError
from tests.helpers import fails, ingest, make_workspace, real_lines, run_in, xai_config

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


def test_a_linked_folder_inside_the_corpus_folder_is_one_error_line(tmp_path):
    """A file pattern reads through a linked folder while the file walk (the raw folder's identity) does not enter it:
    its data would be read and never recorded, so a changed link would leave the build cached on other data."""
    ws = make_workspace(tmp_path, "xai4heat", xai_config(held_out_sites="[]"), {"kept/xai4heat_scada_L4.csv": BODY})
    raw = ws.root / "data" / "raw" / "xai4heat"
    (raw / "linked").symlink_to(raw / "kept", target_is_directory=True)
    result = run_in(ws, "build", "--corpus", "xai4heat", "--until", "ingest")
    message = fails(result, "linked: a link to the folder", "inside the corpus folder", "copy the files in place")
    assert "\n" not in message
