"""Pinned digests of a tiny real slice. If one changes, the change to outputs was deliberate:
review it, then update the pins in the same commit and say why in its message."""

from __future__ import annotations

import json

from pipeline.core.manifest import MANIFEST
from pipeline.harness.build import build
from tests.helpers import make_workspace, real_lines, xai_config

PINNED = {
    "observations": "8ad5d56efee922f91801b3807c179341",
    "aggregates": "63de980ae97d8ccbceeaecb955ded647",
    "quality": "babdfcbe6ed2be7c4d1bfa7878eed18e",
    "thresholds": "7b77713326ea4a66cd67f1a03aee03f2",
}


def test_tiny_slice_digests_are_pinned(tmp_path):
    body = "\n".join(real_lines("xai4heat/xai4heat_scada_L4.csv", range(36000, 36050))) + "\n"
    ws = make_workspace(tmp_path, "xai4heat", xai_config(held_out_sites="[]"), {"xai4heat_scada_L4.csv": body})
    build(ws, until="store")
    manifest = json.loads((ws.stage_dir("xai4heat", "store") / MANIFEST).read_text())
    assert {name: manifest["logical_digests"][name] for name in PINNED} == PINNED
