"""Partition invariance: any number of partitions, batches and workers gives byte-identical outputs."""

from __future__ import annotations

import json
import shutil
import zipfile
from pathlib import Path

import pytest

from pipeline.core.errors import ConfigError, StageError, TelemetryBenchError
from pipeline.core.executor import Scope, scopes
from pipeline.core.parts import check_location, join, read_part
from pipeline.core.resources import Resources, parse_bytes
from pipeline.core.workspace import Workspace
from pipeline.harness.build import build
from pipeline.ingest import parquet
from pipeline.ingest.synth import synth_bts
from pipeline.store.build import logical_digests
from pipeline.store.reader import STORE_FILE
from tests.helpers import FAULTS, RAW, REPO, copy_config, make_workspace, real_lines, xai_config

pytestmark = pytest.mark.slow  # builds a corpus of its own (make test-fast skips it)


TTL = RAW / "bts-site-b" / "Site_B.ttl"
STAGES = ("ingest", "store")


def _synthetic_site(root: Path) -> Workspace:
    """Synthetic Site B (24 streams) plus a corrupt member, a stray file and a member with no metadata."""
    raw = root / "raw"
    synth_bts(TTL, 24, 4, 5, raw, FAULTS)
    archive = raw / "Site_Baa.zip"
    with zipfile.ZipFile(archive) as source:
        members = {info.filename: source.read(info) for info in source.infolist()}
    names = sorted(members)
    members[names[3]] = members[names[3]][:50]  # corrupt: its stream is refused and reported missing
    members["Site_Baa/README.txt"] = b"not a pickle"
    members["Site_Baa/deadbeef_0000.pickle"] = b"\x80\x04N."  # a pickle of None: corrupt, owned by its name
    with zipfile.ZipFile(archive, "w") as target:
        for name, data in sorted(members.items()):
            target.writestr(zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0)), data)  # same bytes every run
    (root / "configs" / "corpora").mkdir(parents=True)
    (root / "configs" / "corpora" / "bts.toml").write_text(copy_config("bts"), encoding="utf-8")
    from tests.helpers import copy_shared_configs

    copy_shared_configs(root)
    return Workspace.from_root(root)


def _outputs(ws: Workspace, corpus: str) -> dict[str, bytes]:
    files = {}
    for stage in STAGES:
        folder = ws.stage_dir(corpus, stage)
        for path in sorted(folder.iterdir()):
            if path.name not in (STORE_FILE, "outputs.local.json"):  # the store file's own size and digest
                files[f"{stage}/{path.name}"] = path.read_bytes()
        assert not (folder / ".parts").exists(), "batch folders must not outlive the stage"
    return files


def _build_all(tmp_path: Path, make, corpus: str, raw: str | None, runs: list[Resources]) -> list[dict[str, bytes]]:
    results = []
    for index, resources in enumerate(runs):
        ws = make(tmp_path / f"run{index}")
        build(ws, [corpus], until="store", resources=resources, raw=raw and str(tmp_path / f"run{index}" / raw))
        results.append(_outputs(ws, corpus))
    return results


RUNS = [
    Resources(partitions=1, workers=1),
    Resources(partitions=2, workers=1, memory_budget=300_000),  # several batches per partition, many store units
    Resources(partitions=4, workers=1, memory_budget=2_000_000),
]


def test_synthetic_site_is_partition_invariant(tmp_path, monkeypatch):
    monkeypatch.setattr(parquet, "ROW_GROUP_SIZE", 2_000)  # several row groups and a chunked digest on a small site
    first, *others = _build_all(tmp_path, _synthetic_site, "bts", "raw", RUNS)
    report = json.loads(first["ingest/report.json"])
    assert report["streams"] == 23 and report["observations"] > 10_000
    assert {m["reason"] for m in report["rejected_members"]} == {"corrupt_pickle", "unmatched_member"}
    for other in others:
        assert other.keys() == first.keys()
        assert [name for name in first if first[name] != other[name]] == []


def test_spawned_workers_match_one_process(tmp_path, monkeypatch):
    monkeypatch.setattr(parquet, "ROW_GROUP_SIZE", 2_000)
    runs = [Resources(partitions=1, workers=1), Resources(partitions=3, workers=2, memory_budget=300_000)]
    first, second = _build_all(tmp_path, _synthetic_site, "bts", "raw", runs)
    assert [name for name in first if first[name] != second[name]] == []


def test_parts_at_an_fsspec_url_change_nothing_and_are_removed(tmp_path, monkeypatch):
    """Spawned workers leave their parts at a file:// URL (through fsspec, as on shared storage); the outputs are the
    bytes of a one-process build, and nothing is left there."""
    monkeypatch.setattr(parquet, "ROW_GROUP_SIZE", 2_000)
    shared = tmp_path / "shared parts"  # a space: the URL is used as given
    shared.mkdir()
    url = check_location(f"file://{shared}")
    runs = [
        Resources(partitions=1, workers=1),
        Resources(partitions=3, workers=2, memory_budget=300_000, parts=url),
    ]
    first, second = _build_all(tmp_path, _synthetic_site, "bts", "raw", runs)
    assert [name for name in first if first[name] != second[name]] == []
    assert [p for p in shared.rglob("*")] == []


def test_an_unreachable_parts_location_is_a_one_line_error(tmp_path, monkeypatch):
    with pytest.raises(ConfigError, match="nosuchfs://bucket/parts.*scheme .nosuchfs. is not one of file, s3"):
        check_location("nosuchfs://bucket/parts")
    with pytest.raises(ConfigError, match="scheme 'memory' is not one of"):
        check_location("memory://")  # each worker would have its own
    monkeypatch.chdir(tmp_path)
    (tmp_path / "relative" / "parts").mkdir(parents=True)
    assert check_location("file://relative/parts") == f"file://{tmp_path}/relative/parts"  # workers start elsewhere
    assert join(check_location("file:///"), "store-1", "u0") == "file:///store-1/u0"
    corrupt = tmp_path / "corrupt.arrow"
    corrupt.write_bytes(b"not an arrow file")
    with pytest.raises(StageError, match=f"{corrupt}: cannot read this intermediate part"):
        read_part(f"file://{corrupt}")
    ws = _synthetic_site(tmp_path / "run")
    blocker = tmp_path / "blocker"
    blocker.mkdir()
    resources = Resources(partitions=3, workers=2, memory_budget=300_000, parts=f"file://{blocker}")
    blocker.rmdir()  # the folder, checked when the build was given it, became a file since
    blocker.write_text("a file where the parts folder should be", encoding="utf-8")
    with pytest.raises(TelemetryBenchError, match="cannot write this intermediate part") as caught:
        build(ws, ["bts"], until="store", resources=resources, raw=str(tmp_path / "run" / "raw"))
    assert "\n" not in str(caught.value)
    (tmp_path / "parts").mkdir()
    assert check_location(str(tmp_path / "rel" / ".." / "parts")) == str(tmp_path / "parts")


def test_csv_corpus_is_partition_invariant(tmp_path):
    """Wide files hold many streams: every batch reads them and keeps its own cells (and unmapped ones by file)."""
    body = "\n".join(real_lines("xai4heat/xai4heat_scada_L4.csv", range(36000, 36400))) + "\n"
    header, *rows = body.splitlines()
    rows[5] = rows[5] + ",1,2"  # a malformed record: one reject per value column
    text = "\n".join([header + ",stray_sensor", *[r + ",7" for r in rows]]) + "\n"

    def make(root: Path) -> Workspace:
        config = xai_config(held_out_sites="[]").replace(
            'site_label = "substation {site}"', 'site_label = "substation {site}"\nunmapped_columns = "reject"'
        )
        return make_workspace(root, "xai4heat", config, {"xai4heat_scada_L4.csv": text})

    first, *others = _build_all(tmp_path, make, "xai4heat", None, RUNS)
    report = json.loads(first["ingest/report.json"])
    assert report["rejects_by_reason"].get("unmapped_column") and report["rejects_by_reason"].get("malformed_row")
    for other in others:
        assert [name for name in first if first[name] != other[name]] == []


def test_chunked_digest_is_what_the_store_file_reads_back(tmp_path, monkeypatch):
    monkeypatch.setattr(parquet, "ROW_GROUP_SIZE", 1_500)
    ws = _synthetic_site(tmp_path)
    build(ws, ["bts"], until="store", resources=Resources(partitions=2, workers=1), raw=str(tmp_path / "raw"))
    manifest = json.loads((ws.stage_dir("bts", "store") / "manifest.json").read_text())
    assert manifest["row_counts"]["observations"] > 3 * 1_500
    assert logical_digests(ws.stage_dir("bts", "store") / STORE_FILE) == manifest["logical_digests"]


def test_scopes_cover_every_key_once():
    keys = [f"stream-{i}" for i in range(500)]
    owners = [[s for s in scopes(3, 4) if s.owns(k)] for k in keys]
    assert all(len(o) == 1 for o in owners)
    assert len({o[0] for o in owners}) == 12  # every batch gets work
    assert Scope().owns("anything")


def test_memory_budget_parsing():
    assert parse_bytes("4GB") == 4 << 30 and parse_bytes("1500MB") == 1500 << 20 and parse_bytes("2g") == 2 << 30
    for bad in ("lots", "10MB", "-1GB"):
        with pytest.raises(ConfigError):
            parse_bytes(bad)
    assert REPO.is_dir()


def test_background_consumes_in_order_and_hands_back_the_first_error():
    from pipeline.core.executor import Background

    seen = []
    worker = Background(seen.append, depth=2, name="test")
    for item in range(50):
        worker.put(item)
    worker.close()
    assert seen == list(range(50))

    def fail_on_three(item):
        if item == 3:
            raise ValueError("three")
        seen.append(item)

    seen.clear()
    worker = Background(fail_on_three, depth=1, name="test")
    with pytest.raises(ValueError, match="three"):
        for item in range(100):  # put raises once the error is seen; it never blocks
            worker.put(item)
        worker.close()
    worker.close(check=False)
    assert seen == [0, 1, 2]


@pytest.mark.slow
def test_family_units_on_spawned_workers_match_one_process(tmp_path, real_artifacts, monkeypatch):
    """The tasks stage's family units on 2 spawned workers (each its own store connection, results merged by family)
    write the tasks files of the session's build, where the families ran in one process."""
    from pipeline.tasks import compile as tasks_compile

    monkeypatch.setattr(tasks_compile, "UNIT_OBSERVATIONS", 0)  # a small corpus too runs its families as units
    ws = Workspace.from_root(REPO, tmp_path)
    built = Workspace.from_root(REPO, real_artifacts)
    for stage in ("ingest", "store"):  # the session's stages, found cached: only the tasks stage runs
        shutil.copytree(built.stage_dir("xai4heat", stage), ws.stage_dir("xai4heat", stage))
    outcomes = build(ws, ["xai4heat"], until="tasks", resources=Resources(workers=2))
    assert [(o.stage, o.status) for o in outcomes] == [("ingest", "cached"), ("store", "cached"), ("tasks", "built")]
    folder, expected = ws.stage_dir("xai4heat", "tasks"), built.stage_dir("xai4heat", "tasks")
    assert sorted(p.name for p in folder.iterdir()) == sorted(p.name for p in expected.iterdir())
    assert [p.name for p in sorted(folder.iterdir()) if p.read_bytes() != (expected / p.name).read_bytes()] == []
