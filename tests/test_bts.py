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
from tests.helpers import RAW, REPO

TTL = RAW / "bts-site-b" / "Site_B.ttl"


class Evil:
    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def run(artifacts, *args):
    return CliRunner().invoke(main, ["--root", str(REPO), "--artifacts", str(artifacts), *args])


def test_synth_is_deterministic(tmp_path):
    synth_bts(TTL, 5, 1, 3, tmp_path / "a")
    synth_bts(TTL, 5, 1, 3, tmp_path / "b")
    for name in ("Site_Baa.zip", "Site_B_metadata.csv", "Site_B.ttl", "SYNTHETIC.md"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    header = (tmp_path / "a" / "Site_B_metadata.csv").read_text().splitlines()[0]
    assert header == ",StreamID,Brick,count,first_t,last_t,mean,std,min,q1,median,q3,max,nUnique"


@pytest.mark.slow
def test_build_from_synthetic_site_b_with_a_malicious_member(tmp_path):
    """Long enough (two years) for time-blocked splits, so every stage runs on the synthetic data (the release gate
    then refuses it: the synthetic readings have no gap to abstain on)."""
    raw = tmp_path / "raw"
    result = run(tmp_path / "art", "synth", "bts", "--streams", "4", "--days", "730", "--seed", "7", "--out", str(raw))
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
    result = run(tmp_path / "art", "build", "--corpus", "bts", "--raw", str(raw), "--json")
    # The synthetic readings have no gaps, so no commitment can be an abstention: every stage runs, and the release
    # gate refuses the release in one line (a release whose commitments cannot abstain tests no quality decision).
    assert result.exit_code == 1 and "Traceback" not in result.output
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "commitment_mix" in errors[0] and "no abstain row" in errors[0], errors
    assert not marker.exists(), "the pickle ran code"
    report = json.loads((tmp_path / "art" / "bts" / "ingest" / "report.json").read_text())
    refused = {m["member"]: m["reason"] for m in report["rejected_members"]}
    assert refused[victim] == "unsafe_pickle" and refused["Site_Baa/deadbeef_0000.pickle"] == "corrupt_pickle"
    assert refused["Site_Baa/README.txt"] == "unmatched_member"
    # The metadata CSV still lists the two refused streams: their counts cannot be checked, nothing else disagrees.
    assert not [n for n in report["notes"] if "says" in n or "in the graph" in n]
    assert report["streams"] == 3 and report["synthetic"] is True
    assert not (tmp_path / "art" / "bts" / "release" / "release.json").is_file()
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
    synth_bts(TTL, 4, 1, 11, raw)
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
