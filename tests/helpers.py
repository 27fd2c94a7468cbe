"""Test helpers: tiny workspaces built from slices of the real shipped corpora."""

from __future__ import annotations

import csv
import hashlib
import json
import os
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path

import polars as pl
from click.testing import CliRunner, Result

from pipeline.cli import main
from pipeline.core.config import load_mapping, load_synth_config
from pipeline.core.workspace import Workspace
from pipeline.harness.build import build

REPO = Path(__file__).resolve().parents[1]
# The corpora shipped with a release (artifacts/<name>/release/, committed): what a build of every corpus releases.
SHIPPED = tuple(sorted(p.parent.parent.name for p in (REPO / "artifacts").glob("*/release/release.json")))
# The shipped corpus with the smallest committed release (pvdaq: 688 KB, its store loaded in 0.2 s against xai4heat's
# 0.9 s). A test module whose cases each load a store or verify a whole release, testing how release files are read
# whatever the corpus, sets RELEASE_CORPUS = SMALLEST for the `release` fixture (tests/conftest.py).
SMALLEST = min(
    SHIPPED,
    key=lambda name: sum(f.stat().st_size for f in (REPO / "artifacts" / name / "release").rglob("*") if f.is_file()),
)
RAW = REPO / "data" / "raw"
FAULTS = load_synth_config(Workspace.from_root(REPO)).faults  # the generator's default fault rates
FUZZ_ENV = "TELEMETRY_BENCH_FUZZ"  # set by `make fuzz`: the fuzz tests draw their large example counts


def fuzz_settings(default: int, fuzz: int):
    """Hypothesis settings of a fuzz test: in `make test` few examples, the same ones every run (derandomized); in
    `make fuzz` many, new ones each run (a failure prints the example to replay)."""
    from hypothesis import HealthCheck, settings

    fuzzing = bool(os.environ.get(FUZZ_ENV))
    return settings(
        max_examples=fuzz if fuzzing else default,
        deadline=None,
        derandomize=not fuzzing,
        suppress_health_check=list(HealthCheck),
        database=None,
    )


def run_cli(artifacts: Path, *args: str) -> Result:
    """The CLI on the repository's configs and raw data, writing into the given artifacts folder."""
    return CliRunner().invoke(main, ["--root", str(REPO), "--artifacts", str(artifacts), *args])


def always_answer(trace: Path, out: Path, agent: str = "always-answer") -> Path:
    """A quality-blind agent's trace: `trace` (the oracle's) with every commitment decision made "answer" (only the
    commitment's answer form has a `decision` field), under another agent name (another identity)."""
    lines = [json.loads(line) for line in trace.read_text(encoding="utf-8").splitlines()]
    for record in lines[1:]:
        fields = (record.get("action") or {}).get("fields") or {}
        if "decision" in fields:
            fields["decision"] = "answer"
    out.write_text("".join(json.dumps(r) + "\n" for r in [{**lines[0], "agent": agent}, *lines[1:]]), encoding="utf-8")
    return out


def verify_cli(folder: Path) -> Result:
    """`verify --release FOLDER`."""
    return CliRunner().invoke(main, ["--root", str(REPO), "verify", "--release", str(folder)])


def real_lines(rel: str, numbers: Iterable[int]) -> list[str]:
    """Header plus the given 1-based line numbers of a shipped raw file, verbatim."""
    lines = (RAW / rel).read_text(encoding="utf-8").splitlines()
    return [lines[0]] + [lines[n - 1] for n in numbers]


def make_workspace(tmp: Path, name: str, config: str, files: dict[str, str | bytes]) -> Workspace:
    """A project root with one corpus mapping and its raw files (text or bytes)."""
    (tmp / "configs" / "corpora").mkdir(parents=True, exist_ok=True)
    (tmp / "configs" / "corpora" / f"{name}.toml").write_text(config, encoding="utf-8")
    copy_shared_configs(tmp)
    raw = tmp / "data" / "raw" / name
    raw.mkdir(parents=True, exist_ok=True)
    for rel, content in files.items():
        target = raw / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(content, encoding="utf-8")
    return Workspace.from_root(tmp)


def copy_shared_configs(root: Path) -> None:
    """configs/*.toml other than corpus mappings (build, families, episodes), unless already there."""
    for shared in sorted((REPO / "configs").glob("*.toml")):
        if not (root / "configs" / shared.name).exists():
            shutil.copyfile(shared, root / "configs" / shared.name)


def copy_config(name: str) -> str:
    return (REPO / "configs" / "corpora" / f"{name}.toml").read_text(encoding="utf-8")


def copy_real(tmp: Path, corpus: str, rels: list[str]) -> None:
    for rel in rels:
        target = tmp / "data" / "raw" / corpus / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(RAW / corpus / rel, target)


def ingest(ws: Workspace, name: str) -> dict[str, pl.DataFrame]:
    """Run ingest for one corpus and load every normalized table."""
    build(ws, [name], until="ingest")
    out = ws.stage_dir(name, "ingest")
    return {p.stem: pl.read_parquet(p) for p in out.glob("*.parquet")}


def mapping(ws: Workspace, name: str):
    return load_mapping(ws.corpus_config(name))


XAI_HEADER = "datetime,t_amb,t_ref,t_sup_prim,t_ret_prim,t_sup_sec,t_ret_sec,e,pe"


def xai_config(**overrides: str) -> str:
    """The shipped xai4heat mapping, with `key = value` lines replaced where asked."""
    text = copy_config("xai4heat")
    for key, value in overrides.items():
        lines = text.splitlines()
        lines = [f"{key} = {value}" if line.split("=")[0].strip() == key else line for line in lines]
        text = "\n".join(lines) + "\n"
    return text


# Every 24th record of a whole shipped file: small, but years long, as time-blocked splits need (3 blocks, 2 buffers).
TINY_XAI = "\n".join(real_lines("xai4heat/xai4heat_scada_L8.csv", range(2, 31244, 24))) + "\n"
TINY_HHW = "\n".join(real_lines("hhw/timeseries/127hhw_system_data.csv", range(2, 17557, 24))) + "\n"


def tiny_workspace(root: Path) -> Workspace:
    """A project of thinned copies of both shipped CSV corpora (no held-out site), quick to build end to end."""
    (root / "configs" / "corpora").mkdir(parents=True)
    copy_shared_configs(root)
    (root / "configs" / "corpora" / "xai4heat.toml").write_text(xai_config(held_out_sites="[]"))
    (root / "configs" / "corpora" / "hhw.toml").write_text(
        copy_config("hhw").replace('held_out_sites = ["building124"]', "held_out_sites = []")
    )
    raw = root / "data" / "raw"
    (raw / "xai4heat").mkdir(parents=True)
    (raw / "xai4heat" / "xai4heat_scada_L8.csv").write_text(TINY_XAI)
    (raw / "hhw" / "brick").mkdir(parents=True)
    (raw / "hhw" / "timeseries").mkdir(parents=True)
    shutil.copyfile(
        REPO / "data/raw/hhw/brick/building_127_condensing_m.ttl", raw / "hhw/brick/building_127_condensing_m.ttl"
    )
    (raw / "hhw" / "timeseries" / "127hhw_system_data.csv").write_text(TINY_HHW)
    return Workspace.from_root(root)


def run_in(ws, *args: str):
    """The CLI on a workspace's project folder (--root), as a user would run it there."""
    from click.testing import CliRunner

    from pipeline.cli import main

    return CliRunner().invoke(main, ["--root", str(ws.root), *args])


def fails(result, *fragments: str) -> str:
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    message = result.output.strip()
    assert message.startswith("error: ") and "\n" not in message, message
    for fragment in fragments:
        assert fragment in message, message
    return message


def rehash_release(folder: Path, *, versions: bool = False) -> None:
    """Rewrite a release's digests after a change of its files, as a careful forger would: every file entry of
    release.json, its own digest (manifest_xxh3), and manifest.json's outputs, inputs and cache key; with `versions`,
    release_version and the release digest too (the card restating it). Only a digest from elsewhere (`verify
    --expect`) then tells the folder from the release it was."""
    from pipeline.core.canonical import digest_file, digest_value, pretty_json
    from pipeline.core.manifest import StageIdentity
    from pipeline.release.stage import file_entry

    path = folder / "release.json"
    manifest = json.loads(path.read_text())
    for name in manifest["files"]:
        if (folder / name).is_file():
            manifest["files"][name] = file_entry(folder / name)
    if versions:
        from pipeline.release.stage import CARD, DIGEST_PLACEHOLDER, blank_card, content_digest, release_version

        manifest["release_version"] = release_version(manifest["files"])
        blank = blank_card((folder / CARD).read_bytes(), manifest["release_digest"])
        manifest["release_digest"] = content_digest(manifest, hashlib.sha256(blank).hexdigest())
        (folder / CARD).write_bytes(blank.replace(DIGEST_PLACEHOLDER.encode(), manifest["release_digest"].encode()))
        manifest["files"][CARD] = file_entry(folder / CARD)
    manifest.pop("manifest_xxh3", None)
    manifest["manifest_xxh3"] = digest_value(manifest)
    path.write_text(pretty_json(manifest))
    stage_path = folder / "manifest.json"
    stage = json.loads(stage_path.read_text())
    stage["outputs"] = {
        name: {"bytes": (folder / name).stat().st_size, "xxh3": digest_file(folder / name)}
        for name in stage["outputs"]
        if (folder / name).is_file()
    }
    for key in ("release_version", "release_digest"):
        if key in stage["details"]:
            stage["details"][key] = manifest[key]
    for key in stage["inputs"]:  # the release stage's inputs: the audited splits and the store's tables
        name = key.removeprefix("audit/")
        if name in manifest["files"]:
            stage["inputs"][key] = manifest["files"][name]["xxh3"]
    identity = StageIdentity(
        **{k: stage[k] for k in ("corpus", "stage", "code_version", "contract_hash", "config_hash", "libraries")},
        inputs=stage["inputs"],
    )
    stage["cache_key"] = identity.cache_key
    stage_path.write_text(pretty_json(stage))


def poison_release(release: Path) -> None:
    """Every observation 1000 higher, digests recomputed: the same corpus and release_version, another content."""
    import duckdb

    path = release / "store" / "observations.parquet"
    with duckdb.connect() as con:
        con.execute(
            "COPY (SELECT * REPLACE (value + 1000 AS value) FROM read_parquet(?) ORDER BY stream_id, ts) TO ? "
            "(FORMAT parquet)",
            [str(path), str(path) + ".new"],
        )
    os.replace(str(path) + ".new", path)
    rehash_release(release)


def forge_release(release: Path) -> int:
    """Issue 53's forgery: every day mean of one stream (L4__t_amb) that is not its max moved halfway to it (inside
    its min..max, so the store's invariants hold), then the Croissant hash of the table, every digest, the card and
    both manifests recomputed with the project's own functions. `verify --release` finds it intact; only a digest
    from elsewhere tells it. Returns how many means moved."""
    import duckdb

    from pipeline.core.canonical import pretty_json
    from pipeline.core.checksums import sha256_file

    path, moved = release / "store" / "aggregates.parquet", "stream_id = 'L4__t_amb' AND period = 'day' AND max > mean"
    with duckdb.connect() as con:
        (count,) = con.execute(f"SELECT count(*) FROM read_parquet(?) WHERE {moved}", [str(path)]).fetchone()
        con.execute(
            f"COPY (SELECT * REPLACE (CASE WHEN {moved} THEN (mean + max) / 2 ELSE mean END AS mean) "
            "FROM read_parquet(?)) TO ? (FORMAT parquet)",
            [str(path), str(path) + ".new"],
        )
    os.replace(str(path) + ".new", path)
    croissant = json.loads((release / "croissant.json").read_text())
    for item in croissant["distribution"]:
        if item.get("contentUrl") == "store/aggregates.parquet":
            item["sha256"] = sha256_file(path)
    (release / "croissant.json").write_text(pretty_json(croissant))
    rehash_release(release, versions=True)
    return count


def poisoned_copy(release: Path, folder: Path) -> Path:
    """A copy of a release, poisoned (`poison_release`)."""
    shutil.copytree(release, folder)
    poison_release(folder)
    return folder


def tool_results(trace: Path) -> list:
    """The tool results of a trace, in order: what the store answered."""
    records = [json.loads(line) for line in trace.read_text().splitlines()[1:]]
    return [r["tool_result"] for r in records if r.get("type") == "turn" and r.get("tool_result") is not None]


def process_alive(pid: int) -> bool:
    """Whether a process runs (a zombie waiting for its parent to reap it does not); read from /proc."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def store_table(release: Path, table: str):
    """A store table of a release folder (store/<table>.parquet), as Arrow."""
    import pyarrow.parquet as pq

    return pq.read_table(release / "store" / f"{table}.parquet")


def rewrite_table(release: Path, table: str, data) -> None:
    """A store table of a release replaced, every digest recomputed as a forger would (verify --release passes)."""
    import pyarrow.parquet as pq

    pq.write_table(data, release / "store" / f"{table}.parquet")
    rehash_release(release, versions=True)


def set_cell(release: Path, table: str, column: str, value: object, row: int = 0) -> None:
    """One cell of a release's store table replaced, the other rows as they were."""
    import pyarrow as pa

    data = store_table(release, table)
    changed = {**data.slice(row, 1).to_pylist()[0], column: value}
    one = pa.Table.from_pylist([changed], schema=data.schema)
    rewrite_table(release, table, pa.concat_tables([data.slice(0, row), one, data.slice(row + 1)]))


def every_tool_call(store, stream: str) -> list[tuple[str, dict]]:
    """A call of every tool about one stream of an open store (windows where the stream has rows), each metric and
    period included: what a store's values can reach."""
    quality = store.quality.get(stream) or {}
    first = quality.get("first_ts") or 1_700_000_000_000_000
    day = first - first % 86_400_000_000 + 86_400_000_000
    from pipeline.tools.timeutil import format_us

    window = {"window_start": format_us(day), "window_end": format_us(day + 86_400_000_000)}
    streams = list(store.streams)[:4] + [stream]
    site = (store.streams.get(stream) or {}).get("site_id") or "nowhere"
    point_class = (store.streams.get(stream) or {}).get("point_class") or "x"
    return [
        ("resolve_point", {"site": site, "point_class": point_class}),
        ("list_points", {"site": site}),
        ("inspect_quality", {"stream_id": stream}),
        ("lookup_observation", {"stream_id": stream, "timestamp": format_us(first), "mode": "exact"}),
        ("lookup_observation", {"stream_id": stream, "timestamp": format_us(day + 1), "mode": "nearest"}),
        *(
            ("aggregate_window", {"stream_id": stream, "period": period, "metric": metric, **window})
            for period in ("day", "custom")
            for metric in ("mean", "sum", "std", "min", "max", "count")
        ),
        (
            "compare_window",
            {"left_stream_id": stream, "right_stream_id": streams[0], "metric": "std", "period": "custom", **window},
        ),
        ("rank_window", {"stream_ids": streams, "metric": "sum", "period": "day", **window}),
        ("rank_window", {"stream_ids": streams, "metric": "mean", "period": "custom", **window}),
        ("inspect_quality_window", {"stream_id": stream, "period": "day", **window}),
        ("inspect_quality_window", {"stream_id": stream, "period": "custom", **window}),
    ]


def one_error_line(result: Result, *expected: str) -> str:
    """The command ended with exit status 1 and one `error:` line (the CLI's handler, not an exception) holding each
    expected text."""
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in result.output, result.output
    assert all(e in lines[0] for e in expected), result.output
    return lines[0]


USER_ANSWERS = {
    "title": "Telemetry a user brought",
    "license": "CC-BY-4.0",
    "license_url": "https://creativecommons.org/licenses/by/4.0/",
    "citation": "The user's own export",
}


def fill_drafted_mapping(
    path: Path,
    *,
    classes: dict[str, str] | None = None,
    edit: Callable[[dict[str, str]], None] | None = None,
    **answers: str,
) -> str:
    """What a user does to a drafted mapping: write each top-level TODO key (title, license, license_url, citation)
    and confirm each CHECK by deleting "CHECK "; nothing else is touched. With `classes` (or `edit`), the points
    table beside it too: each TODO point class written from `classes` (by key), each CHECK confirmed, then `edit` on
    each row (what else the user knows, e.g. a room's equipment). Returns the mapping's text written."""
    import re

    given = {**USER_ANSWERS, **answers}
    text = path.read_text(encoding="utf-8")
    for key, value in given.items():
        text = re.sub(rf'(?m)^{key} = "TODO[^"\n]*"', f'{key} = "{value}"', text)
    assert "TODO" not in re.sub(r"#.*", "", text), "a TODO the user was not told about"
    text = text.replace('"CHECK ', '"')
    path.write_text(text, encoding="utf-8")
    if classes is not None or edit is not None:
        fill_drafted_points(path.parent / path.stem / "points.csv", classes or {}, edit)
    return text


def fill_drafted_points(
    path: Path, classes: dict[str, str], edit: Callable[[dict[str, str]], None] | None = None
) -> list[dict[str, str]]:
    """The user's part of a drafted points table: a Brick class for each TODO (from `classes`; a TODO it does not
    answer fails the test), each CHECK confirmed, then `edit` on each row. Returns the rows written."""
    with path.open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    for row in rows:
        if row["point_class"] == "TODO":
            assert row["key"] in classes, f"{path}: the TODO class of {row['key']!r} has no answer"
            row["point_class"] = classes[row["key"]]
        row.update({column: cell.removeprefix("CHECK ") for column, cell in row.items()})
        if edit is not None:
            edit(row)
        assert "TODO" not in "".join(row.values()), f"{path}: a TODO the user was not told about: {row}"
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return rows


def renamed_copy(tmp_path: Path, corpus: str) -> tuple[Path, str]:
    """A project holding the corpus's raw files under a new name (hard links where the file system allows them, else
    copies: a symlink out of the corpus folder is refused by ingest)."""
    root, name = tmp_path / "p", f"{corpus}_copy"
    (root / "configs" / "corpora").mkdir(parents=True)
    copy_shared_configs(root)
    source = REPO / "data" / "raw" / corpus
    for path in sorted(p for p in source.rglob("*") if p.is_file()):
        target = root / "data" / "raw" / name / path.relative_to(source)
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(path, target)
        except OSError:
            shutil.copyfile(path, target)
    return root, name


def sweep(every_run: Iterable, more: Iterable) -> list:
    """Parameters of a test that builds a corpus per value: `every_run` in make test and CI, `more` (further seeds or
    corpora of the same check) only in `make fuzz` (TELEMETRY_BENCH_FUZZ=1, marker fuzz), where a sweep of builds
    belongs: each one is minutes of CPU, and CI runs the suite twice."""
    import pytest

    fuzzing = bool(os.environ.get(FUZZ_ENV))
    reason = "one of a sweep of builds: run by make fuzz (TELEMETRY_BENCH_FUZZ=1)"
    return [*every_run] + [
        pytest.param(
            *(value if isinstance(value, tuple) else (value,)),
            marks=[pytest.mark.fuzz, pytest.mark.skipif(not fuzzing, reason=reason)],
        )
        for value in more
    ]
