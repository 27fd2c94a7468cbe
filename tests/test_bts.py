"""The BTS raw format: synthetic Site B data end to end, and pickles that try to run code."""

from __future__ import annotations

import io
import json
import os
import pickle
import zipfile

import pytest
from click.testing import CliRunner

from pipeline.cli import main
from pipeline.ingest.synth import synth_bts
from tests.helpers import FAULTS, RAW, REPO

TTL = RAW / "bts-site-b" / "Site_B.ttl"


class Evil:
    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def run(artifacts, *args):
    return CliRunner().invoke(main, ["--root", str(REPO), "--artifacts", str(artifacts), *args])


def _score(artifacts, split: str, out) -> dict:
    played = run(artifacts, "run", "--corpus", "bts", "--split", split, "--agent", "oracle", "--out", str(out))
    assert played.exit_code == 0, played.output
    scored = run(artifacts, "score", str(out), "--json")
    assert scored.exit_code == 0, scored.output
    return json.loads(scored.output)["summaries"][0]


def _release(artifacts) -> dict[str, bytes]:
    folder = artifacts / "bts" / "release"
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.slow
def test_synthetic_site_b_releases_every_split(tmp_path):
    """The acceptance corpus of issue 52: `synth bts --streams 20 --days 200 --seed 11` builds and releases every
    split through every gate (its faults give the commitments their abstentions and clarifications), the oracle scores
    1.0 on each, the card and release.json say synthetic with generator and seed, and one partition locally or three
    on Ray give the same release bytes."""
    raw = tmp_path / "raw"
    made = run(tmp_path / "a", "synth", "bts", "--streams", "20", "--days", "200", "--seed", "11", "--out", str(raw))
    assert made.exit_code == 0, made.output
    local = ["build", "--corpus", "bts", "--raw", str(raw), "--partitions", "1", "--workers", "1"]
    built = run(tmp_path / "a", *local)
    assert built.exit_code == 0 and "error" not in built.output, built.output
    manifest = json.loads((tmp_path / "a" / "bts" / "release" / "release.json").read_text())
    assert all(manifest["splits"][s] > 0 for s in ("train", "dev", "test")), manifest["splits"]
    assert all(manifest["counts"]["commitment_outcome"][o] > 0 for o in ("answer", "abstain", "re_clarify"))
    assert set(manifest["gates"]) and all(g["status"] != "fail" for g in manifest["gates"].values())
    origin = manifest["synthetic"]
    assert origin["seed"] == 11 and origin["generator"].startswith("telemetry-bench synth bts")
    assert origin["command"].startswith("telemetry-bench synth bts --streams 20 --days 200 --seed 11")
    card = (tmp_path / "a" / "bts" / "release" / "README.md").read_text()
    assert "- synthetic" in card and "(synthetic)" in card and "SYNTHETIC telemetry" in card and "(seed 11)" in card
    for split in ("train", "dev", "test"):
        summary = _score(tmp_path / "a", split, tmp_path / f"oracle-{split}.jsonl")
        assert summary["episodes"] == manifest["splits"][split]
        assert summary["final"] == 1.0 and summary["accomplished_rate"] == 1.0, summary
    pytest.importorskip("ray")
    on_ray = ["build", "--corpus", "bts", "--raw", str(raw), "--partitions", "3", "--executor", "ray"]
    built = run(tmp_path / "b", *on_ray, "--workers", "2")
    assert built.exit_code == 0, built.output
    assert _release(tmp_path / "a") == _release(tmp_path / "b")


@pytest.mark.slow
def test_build_from_synthetic_site_b_with_a_malicious_member(tmp_path):
    """Refused members leave the rest to build: every stage up to the audit runs on the synthetic data (the release of
    a corpus this small depends on its faults: test_synthetic_site_b_releases_every_split releases one)."""
    raw = tmp_path / "raw"
    result = run(tmp_path / "art", "synth", "bts", "--streams", "8", "--days", "200", "--seed", "7", "--out", str(raw))
    assert result.exit_code == 0, result.output
    marker = tmp_path / "pwned"
    archive = raw / "Site_Baa.zip"
    with zipfile.ZipFile(archive) as source:
        members = {info.filename: source.read(info) for info in source.infolist()}
    victim = sorted(members)[0]
    buffer = io.BytesIO()
    pickle.dump([victim.split("/")[-1][: -len(".pickle")], Evil(str(marker)), [1.0]], buffer)
    members[victim] = buffer.getvalue()
    members["Site_Baa/deadbeef_0000.pickle"] = members[sorted(members)[1]][:40]
    members["Site_Baa/README.txt"] = b"not a pickle"
    with zipfile.ZipFile(archive, "w") as target:
        for name, data in sorted(members.items()):
            target.writestr(name, data)
    result = run(tmp_path / "art", "build", "--corpus", "bts", "--raw", str(raw), "--json", "--until", "audit")
    assert result.exit_code == 0 and "Traceback" not in result.output, result.output
    assert not marker.exists(), "the pickle ran code"
    report = json.loads((tmp_path / "art" / "bts" / "ingest" / "report.json").read_text())
    refused = {m["member"]: m["reason"] for m in report["rejected_members"]}
    assert refused[victim] == "unsafe_pickle" and refused["Site_Baa/deadbeef_0000.pickle"] == "corrupt_pickle"
    assert refused["Site_Baa/README.txt"] == "unmatched_member"
    # The metadata CSV still lists the two refused streams: their counts cannot be checked, nothing else disagrees.
    assert not [n for n in report["notes"] if "says" in n or "in the graph" in n]
    assert report["streams"] == 7 and report["synthetic"] is True
    for stage in ("ingest", "store", "tasks", "episodes", "audit"):
        assert (
            json.loads((tmp_path / "art" / "bts" / stage / "manifest.json").read_text())["details"]["synthetic"] is True
        )


def test_bts_is_skipped_without_raw_data(tmp_path, monkeypatch):
    monkeypatch.delenv("TELEMETRY_BENCH_BTS_RAW", raising=False)
    result = run(tmp_path, "build", "--corpus", "bts")
    assert result.exit_code == 0
    assert "bts: skipped, no raw data" in result.output + (result.stderr or "")
    assert not (tmp_path / "bts").exists()


@pytest.mark.parametrize(
    "payload", [b"", b"\x80\x04garbage", pickle.dumps({"not": "a list"}), pickle.dumps(["id", [1], [2]])]
)
def test_bad_pickles_are_value_errors(payload):
    from pipeline.ingest.pickles import load_series

    with pytest.raises(ValueError):
        load_series(payload, 10_000)


def test_metadata_csv_disagreements_are_noted(tmp_path):
    raw = tmp_path / "raw"
    synth_bts(TTL, 4, 1, 11, raw, FAULTS)
    lines = (raw / "Site_B_metadata.csv").read_text().splitlines()
    cells = lines[1].split(",")
    cells[3] = "999999"
    lines[1] = ",".join(cells)
    lines.append("9,ffffffff_ffff_ffff_ffff_ffffffffffff,Point,10,,,,,,,,,,1")
    (raw / "Site_B_metadata.csv").write_text("\n".join(lines) + "\n")
    result = run(tmp_path / "art", "build", "--corpus", "bts", "--raw", str(raw), "--until", "ingest")
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "art" / "bts" / "ingest" / "report.json").read_text())
    assert any("Site_B_metadata.csv says 999999" in n for n in report["notes"])
    assert any(
        m["column"] == "ffffffff_ffff_ffff_ffff_ffffffffffff" and m["point"] == "listed, no member"
        for m in report["missing_columns"]
    )
