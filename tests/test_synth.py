"""`synth bts` faults: one seed writes the same bytes, each fault shows at its rate, and the rate flags validate."""

from __future__ import annotations

import pickle
import zipfile

import numpy as np
import pytest
from click.testing import CliRunner

from contracts.synth import FaultRates
from pipeline.cli import main
from pipeline.ingest.synth import JUMP_MS, STEP_MS, synth_bts
from tests.helpers import FAULTS, RAW, REPO

TTL = RAW / "bts-site-b" / "Site_B.ttl"
DAY_MS = 24 * 60 * 60 * 1000
# rates high enough that a small corpus (60 streams x 30 days, ~236,000 readings) holds hundreds of most faults
RATES = FaultRates(
    dropout=0.03,
    long_gaps=0.06,
    stuck=0.1,
    spikes=0.003,
    out_of_range=0.003,
    clock_jumps=0.002,
    duplicates=0.002,
    counter_resets=0.003,
)


def _streams(folder) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """(point class, timestamps in ms as written, values) of every stream the generator wrote (its own pickles)."""
    classes = {
        line.split(",")[1]: line.split(",")[2] for line in (folder / "Site_B_metadata.csv").read_text().splitlines()[1:]
    }
    with zipfile.ZipFile(folder / "Site_Baa.zip") as archive:
        found = [pickle.loads(archive.read(info)) for info in archive.infolist()]
    return [(classes[key], stamps.astype("datetime64[ms]").astype(np.int64), values) for key, stamps, values in found]


def _measured(folder) -> dict[str, float]:
    """Each fault's rate as read back from the bytes, by what it leaves in them (not by what the generator says)."""
    seen = {k: 0 for k in RATES.model_dump()}
    base = {"all": 0, "temperature": 0, "counter": 0, "varying": 0, "span": 0}
    for point_class, stamps, values in _streams(folder):
        name = point_class.lower()
        command = any(word in name for word in ("command", "status", "enable", "mode"))
        delta = np.diff(stamps)
        base["all"] += len(values)
        base["span"] += int(stamps.max() - stamps.min())
        seen["duplicates"] += int((delta == 0).sum())
        jump = (delta < 0) | (np.abs(delta - STEP_MS - JUMP_MS) <= 30_000)  # back, or one step plus an hour
        seen["clock_jumps"] += int(jump.sum())
        seen["long_gaps"] += int(delta[delta >= DAY_MS].sum())
        short = (delta > 0) & (delta < DAY_MS) & ~jump
        seen["dropout"] += int((np.round(delta[short] / STEP_MS) - 1).sum())
        if "temperature" in name:
            wrong = (values < -40) | (values > 80)
            seen["out_of_range"] += int(wrong.sum())
            base["temperature"] += len(values)
        else:
            wrong = np.zeros(len(values), dtype=bool)
        if "energy" in name:
            seen["counter_resets"] += int((values == 0).sum())
            base["counter"] += len(values)
        if not command:
            base["varying"] += len(values)
            seen["stuck"] += int(((values[1:] == values[:-1]) & (delta != 0)).sum())
            mid, left, right = values[1:-1], values[:-2], values[2:]
            scale = 5 * np.std(values[~wrong])
            spike = (np.abs(mid - left) > scale) & (np.abs(mid - right) > scale) & ~wrong[1:-1]
            seen["spikes"] += int((spike & (np.sign(mid - left) == np.sign(mid - right))).sum())
    per = {"long_gaps": "span", "out_of_range": "temperature", "counter_resets": "counter", "stuck": "varying"}
    per |= {"spikes": "varying"}
    return {k: v / max(1, base[per.get(k, "all")]) for k, v in seen.items()}


def test_same_seed_same_bytes(tmp_path):
    synth_bts(TTL, 5, 3, 3, tmp_path / "a", FAULTS)
    synth_bts(TTL, 5, 3, 3, tmp_path / "b", FAULTS)
    synth_bts(TTL, 5, 3, 4, tmp_path / "c", FAULTS)
    names = ("Site_Baa.zip", "Site_B_metadata.csv", "Site_B.ttl", "SYNTHETIC.md", "SYNTHETIC.json")
    for name in names:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    assert (tmp_path / "a" / "Site_Baa.zip").read_bytes() != (tmp_path / "c" / "Site_Baa.zip").read_bytes()
    header = (tmp_path / "a" / "Site_B_metadata.csv").read_text().splitlines()[0]
    assert header == ",StreamID,Brick,count,first_t,last_t,mean,std,min,q1,median,q3,max,nUnique"


def test_each_fault_at_its_rate(tmp_path):
    synth_bts(TTL, 60, 30, 2, tmp_path, RATES)
    measured = _measured(tmp_path)
    assert measured["counter_resets"] > 0 and measured["out_of_range"] > 0, "the corpus holds counters and temperatures"
    for fault, rate in RATES.model_dump().items():
        # readings lost to gaps and dropouts take their faults with them, and faults overlap a little: 25% either way
        assert measured[fault] == pytest.approx(rate, rel=0.25), (fault, measured[fault], rate)


def test_no_fault_at_rate_zero(tmp_path):
    synth_bts(TTL, 30, 10, 2, tmp_path, FaultRates(**dict.fromkeys(RATES.model_dump(), 0.0)))
    measured = _measured(tmp_path)
    assert measured.pop("stuck") < 1e-3  # the noise of a continuous stream rarely repeats a value
    assert measured == dict.fromkeys(measured, 0.0)  # jitter never drops a reading nor jumps the clock


@pytest.mark.parametrize("value", ["1", "1.5", "-0.1", "nan"])
@pytest.mark.parametrize("flag", ["--dropout", "--long-gaps", "--stuck", "--counter-resets"])
def test_rate_flags_validate(tmp_path, flag, value):
    result = CliRunner().invoke(
        main, ["--root", str(REPO), "synth", "bts", "--days", "2", "--out", str(tmp_path / "o"), flag, value]
    )
    errors = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert result.exit_code == 2 and len(errors) == 1 and flag in errors[0], result.output
    assert not (tmp_path / "o").exists()


def test_flags_set_the_rates(tmp_path):
    result = CliRunner().invoke(
        main,
        ["--root", str(REPO), "synth", "bts", "--streams", "3", "--days", "2", "--seed", "5", "--out", str(tmp_path)]
        + ["--duplicates", "0.25", "--clock-jumps", "0"],
    )
    assert result.exit_code == 0, result.output
    import json

    origin = json.loads((tmp_path / "SYNTHETIC.json").read_text())
    assert origin["faults"] == FAULTS.model_dump() | {"duplicates": 0.25, "clock_jumps": 0.0}
    assert origin["seed"] == 5 and "--duplicates 0.25" in origin["command"]
    assert _measured(tmp_path)["duplicates"] == pytest.approx(0.25 / 1.25, rel=0.2)
