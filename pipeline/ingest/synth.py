"""`synth bts`: the exact BTS raw format (zip of pickles, metadata CSV, Brick TTL) with synthetic values and faults.

Stream ids, classes and equipment come from the real Site_B.ttl; values are plausible per point class (constant
command streams, cumulative energy counters) on a grid of about one reading every 11 minutes with millisecond jitter.
Onto that grid go the faults real building telemetry has, each at its rate (contracts/synth.py; defaults in
configs/synth.toml, measured on the shipped corpora, docs/bts.md): isolated dropouts, long gaps, stuck values, spikes,
out-of-range readings, clock jumps, duplicated timestamps and counter resets. Every draw comes from one numpy Generator
seeded by the seed, and nothing reads the clock: the same seed and rates write the same bytes. The output folder
carries SYNTHETIC.md, naming the generator, the seed and the rates.
"""

from __future__ import annotations

import io
import pickle
import shutil
import zipfile
from pathlib import Path

import numpy as np

from contracts.corpus_metadata import BrickMetadata
from contracts.synth import FaultRates
from pipeline.core.canonical import write_json
from pipeline.core.errors import ConfigError
from pipeline.ingest.brick import read_brick

START = np.datetime64("2021-01-01T00:00:00", "ms")
HEADER = ",StreamID,Brick,count,first_t,last_t,mean,std,min,q1,median,q3,max,nUnique\n"
STEP_MS = 11 * 60 * 1000  # about one reading every 11 minutes, jittered by up to 30 s
PER_DAY = 24 * 60 * 60 * 1000 / STEP_MS
LONG_GAP_DAYS = (1.0, 14.0)  # a long gap lasts 1 to 14 days (the measured rate counts gaps of a day or more)
STUCK_HOURS = (6.0, 72.0)  # a sensor stays frozen 6 hours to 3 days
SPIKE_STDS = (6.0, 20.0)
IMPOSSIBLE = np.array([-99.9, 850.0])  # beyond any range ingest admits for a temperature (a broken RTD reads 850)
JUMP_MS = 60 * 60 * 1000  # a clock jump: one hour forward or back (a missed or doubled DST change, an NTP resync)


def _is_command(name: str) -> bool:
    return any(word in name for word in ("command", "status", "enable", "mode"))


def _is_counter(name: str) -> bool:
    return "energy" in name


def _values(point_class: str, n: int, rng: np.random.Generator) -> np.ndarray:
    name = point_class.lower()
    if _is_command(name):
        return np.full(n, float(rng.integers(0, 2)))  # constant command/status streams
    if "temperature" in name or "setpoint" in name:
        base = 21.0 if "air" in name or "setpoint" in name else 45.0
        return base + 2.0 * np.sin(np.linspace(0, 6 * np.pi, n)) + rng.normal(0, 0.3, n)
    if _is_counter(name):  # a cumulative energy meter (kWh), a little every reading
        return np.cumsum(np.abs(rng.normal(0.4, 0.1, n)))
    if "power" in name or "current" in name or "voltage" in name:
        return np.abs(rng.normal(50, 15, n))
    return rng.normal(10, 3, n)


def _runs(n: int, share: float, shortest: float, longest: float, rng: np.random.Generator) -> np.ndarray:
    """A mask of `n` readings, `share` of them (rounded) True in runs of `shortest` to `longest` readings placed at
    random without overlap (the exact share, so a small corpus shows the rate as well as a large one)."""
    target = round(share * n)
    mask = np.zeros(n, dtype=bool)
    if target == 0:
        return mask
    lengths = np.maximum(1, rng.uniform(shortest, longest, target // max(1, int(shortest)) + 1).astype(np.int64))
    lengths = lengths[: int(np.searchsorted(np.cumsum(lengths), target)) + 1]
    lengths[-1] -= int(lengths.sum()) - target  # the last run ends at the target
    if len(lengths) > 1 and lengths[-1] < shortest:  # too short for its kind: the other runs take its readings
        lengths = lengths[:-1] + np.bincount(
            np.arange(int(lengths[-1])) % (len(lengths) - 1), minlength=len(lengths) - 1
        )
    cuts = np.sort(rng.integers(0, n - target + 1, len(lengths)))  # the free readings before each run
    starts = cuts + np.concatenate(([0], np.cumsum(lengths)[:-1]))
    marks = np.zeros(n + 1, dtype=np.int64)
    np.add.at(marks, starts, 1)
    np.add.at(marks, starts + lengths, -1)
    return np.cumsum(marks[:-1]) > 0


def _some(n: int, share: float, rng: np.random.Generator) -> np.ndarray:
    """`share` of `n` readings (rounded), chosen at random."""
    return np.sort(rng.choice(n, size=round(share * n), replace=False))


def _faulty(point_class: str, days: int, rates: FaultRates, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """One stream's timestamps and values, faults included, in the order the pickle holds them."""
    name = point_class.lower()
    n = max(2, int(days * PER_DAY))
    offsets = np.cumsum(rng.integers(STEP_MS - 30_000, STEP_MS + 30_000, n))
    values = _values(point_class, n, rng)
    if _is_counter(name) and (resets := _some(n, rates.counter_resets, rng)).size:
        restart = np.zeros(n)
        restart[resets] = values[resets]  # the counter restarts from 0 at each reset
        values = values - np.maximum.accumulate(np.where(restart > 0, values, 0.0))
    stuck = _runs(n, rates.stuck, STUCK_HOURS[0] * PER_DAY / 24, STUCK_HOURS[1] * PER_DAY / 24, rng)
    if not _is_command(name) and stuck.any():  # a frozen reading repeats the last one before the run
        last = np.maximum.accumulate(np.where(stuck, 0, np.arange(n)))
        values = values[last]
    scale = max(float(np.std(values)), 1.0)
    spikes = _some(n, rates.spikes, rng)
    if _is_command(name):  # a command or status holds its states: no spike, no frozen run to show
        spikes = spikes[:0]
    values[spikes] += rng.choice([-1.0, 1.0], spikes.size) * rng.uniform(*SPIKE_STDS, spikes.size) * scale
    if "temperature" in name:
        wrong = _some(n, rates.out_of_range, rng)
        values[wrong] = rng.choice(IMPOSSIBLE, wrong.size)
    values = np.round(values, 3)
    jumps = _some(n, rates.clock_jumps, rng)
    shift = np.zeros(n, dtype=np.int64)
    shift[jumps] = rng.choice([-JUMP_MS, JUMP_MS], jumps.size)
    stamps = START + (offsets + np.cumsum(shift)).astype("timedelta64[ms]")
    keep = ~_runs(n, rates.long_gaps, LONG_GAP_DAYS[0] * PER_DAY, LONG_GAP_DAYS[1] * PER_DAY, rng)
    keep[_some(n, rates.dropout, rng)] = False
    keep[0] = keep[-1] = True  # the stream spans its days (a gap at either end would shorten it, not hide data)
    twice = _some(n, rates.duplicates, rng)
    copies = np.ones(n, dtype=np.int64)
    copies[twice] = 2  # a duplicated reading: the same timestamp and value written twice
    copies[~keep] = 0
    return np.repeat(stamps, copies), np.repeat(values, copies)


def synth_bts(ttl: Path, streams: int, days: int, seed: int, out: Path, rates: FaultRates) -> dict:
    if not ttl.is_file():
        raise ConfigError(f"{ttl}: Site_B.ttl not found; it ships in data/raw/bts-site-b")
    meta = BrickMetadata(
        kind="brick",
        files="*.ttl",
        site_classes=["https://brickschema.org/schema/Brick#Building"],
        stream_id_predicate="http://senaps.io/schema/1.0/senaps#stream_id",
    )
    catalog = read_brick([(ttl, ttl.name)], meta)
    keys = sorted(catalog.points_by_key)
    if not 1 <= streams <= len(keys):
        raise ConfigError(f"--streams must be between 1 and {len(keys)} (stream ids in {ttl.name})")
    rng = np.random.default_rng(seed)
    chosen = sorted(rng.choice(keys, size=streams, replace=False).tolist())
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    with zipfile.ZipFile(out / "Site_Baa.zip", "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for index, key in enumerate(chosen):
            point = catalog.points_by_key[key]
            stamps, values = _faulty(point.point_class, days, rates, rng)
            buffer = io.BytesIO()
            pickle.dump([key, stamps, values], buffer, protocol=4)
            info = zipfile.ZipInfo(f"Site_Baa/{key}.pickle", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, buffer.getvalue())
            q = np.quantile(values, [0.25, 0.5, 0.75])
            first, last = (str(stamps.min()) + "Z", str(stamps.max()) + "Z")
            rows.append(
                f"{index},{key},{point.point_class},{len(values)},{first},{last},{values.mean():.6g},{values.std():.6g},"
                f"{values.min():.6g},{q[0]:.6g},{q[1]:.6g},{q[2]:.6g},{values.max():.6g},{len(np.unique(values))}\n"
            )
    (out / "Site_B_metadata.csv").write_text(HEADER + "".join(rows), encoding="utf-8")
    shutil.copyfile(ttl, out / "Site_B.ttl")
    command = f"telemetry-bench synth bts --streams {streams} --days {days} --seed {seed}" + "".join(
        f" --{name.replace('_', '-')} {rate!r}" for name, rate in rates.model_dump().items()
    )
    origin = {
        "generator": "telemetry-bench synth bts (pipeline/ingest/synth.py)",
        "command": command,
        "seed": seed,
        "streams": streams,
        "days": days,
        "faults": rates.model_dump(),
    }
    write_json(out / "SYNTHETIC.json", origin)  # the release says where its data came from (release.json, card)
    (out / "SYNTHETIC.md").write_text(
        f"# Synthetic BTS data\n\nGenerated by `{command}` (pipeline/ingest/synth.py).\n"
        "Stream ids, classes and equipment are real (Site_B.ttl of the BTS data set); every value, timestamp and\n"
        "fault is synthetic. Do not report results on it as results on BTS.\n",
        encoding="utf-8",
    )
    return {**origin, "out": str(out)}
