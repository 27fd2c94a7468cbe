"""build: stage manifests, caching by identity, atomic outputs, determinism across thread counts."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner

from pipeline.cli import main
from pipeline.core.manifest import MANIFEST
from pipeline.core.workspace import Workspace
from pipeline.harness.build import build
from pipeline.release.verify import compare_folders
from pipeline.store.reader import STORE_FILE, open_store
from tests.helpers import REPO, TINY_XAI, tiny_workspace

pytestmark = pytest.mark.slow  # builds a corpus of its own (make test-fast skips it)


def statuses(outcomes) -> dict[tuple[str, str], str]:
    return {(o.corpus, o.stage): o.status for o in outcomes}


@pytest.fixture(scope="session")
def built_once(tmp_path_factory):
    workspace = tiny_workspace(tmp_path_factory.mktemp("built") / "project")
    build(workspace, threads=2)  # test_threads_do_not_change_outputs compares a one-thread build with this one
    return workspace.root


@pytest.fixture
def ws(built_once, tmp_path):
    """A built tiny project of this test's own (a copy of one built once: identities hold no paths, so it is cached)."""
    shutil.copytree(built_once, tmp_path / "project", symlinks=True)
    return Workspace.from_root(tmp_path / "project")


def test_second_build_is_cached(ws):
    assert set(statuses(build(ws)).values()) == {"cached"}


def test_meaningful_config_edit_rebuilds_that_corpus_only(ws):
    path = ws.corpus_config("hhw")
    path.write_text(
        path.read_text().replace(
            "Outside_Air_Temperature_Sensor = [-50.0, 60.0]", "Outside_Air_Temperature_Sensor = [-50.0, 5.0]"
        )
    )
    # up to the store: the edit is about what rebuilds (on the tiny corpus, fewer readings leave its test split no
    # re_clarify row, and the release gate then refuses it, as it should)
    result = statuses(build(ws, until="store"))
    assert result[("hhw", "ingest")] == "built" and result[("hhw", "store")] == "built"
    assert result[("xai4heat", "ingest")] == "cached" and result[("xai4heat", "store")] == "cached"


def test_config_edit_that_changes_no_output_stops_at_ingest(ws):
    path = ws.corpus_config("hhw")
    path.write_text(path.read_text().replace('missing_tokens = ["", "NA"]', 'missing_tokens = ["", "NA", "n/a"]'))
    result = statuses(build(ws))
    assert result[("hhw", "ingest")] == "built" and result[("hhw", "store")] == "cached"


def test_cosmetic_edit_and_mtime_change_nothing(ws):
    path = ws.corpus_config("hhw")
    path.write_text("# a comment\n" + path.read_text())
    raw = ws.root / "data/raw/xai4heat/xai4heat_scada_L8.csv"
    os.utime(raw, (1, 1))
    assert set(statuses(build(ws)).values()) == {"cached"}


def test_raw_edit_rebuilds(ws):
    raw = ws.root / "data/raw/xai4heat/xai4heat_scada_L8.csv"
    raw.write_text(raw.read_text().replace("\n", "\n", 1) + "")  # same bytes: still cached
    assert statuses(build(ws, until="ingest"))[("xai4heat", "ingest")] == "cached"  # the later stages: not asked
    lines = raw.read_text().splitlines()
    raw.write_text("\n".join(lines[:-1]) + "\n")
    assert statuses(build(ws, until="ingest"))[("xai4heat", "ingest")] == "built"


def test_deleted_stage_rebuilds_only_itself(ws):
    shutil.rmtree(ws.stage_dir("hhw", "store"))
    result = statuses(build(ws))
    assert result[("hhw", "store")] == "built"
    assert [k for k, v in result.items() if v == "built"] == [("hhw", "store")]


def test_tampered_output_is_rebuilt(ws):
    target = ws.stage_dir("xai4heat", "ingest") / "rejects.parquet"
    target.write_bytes(target.read_bytes()[:-10])
    assert statuses(build(ws))[("xai4heat", "ingest")] == "built"


def test_manifest_records_identity_without_paths_or_time(ws):
    text = (ws.stage_dir("xai4heat", "store") / MANIFEST).read_text()
    manifest = json.loads(text)
    assert str(ws.root) not in text and "/tmp" not in text
    for key in (
        "code_version",
        "contract_hash",
        "config_hash",
        "libraries",
        "inputs",
        "outputs",
        "row_counts",
        "cache_key",
    ):
        assert manifest[key], key
    assert len(manifest["code_version"]) == 32 and manifest["libraries"]["duckdb"]
    assert set(manifest["logical_digests"]) == set(manifest["row_counts"])
    assert all(name.startswith("ingest/") for name in manifest["inputs"])
    assert not list(ws.stage_dir("xai4heat", "store").parent.glob(".*tmp*"))


def test_threads_do_not_change_outputs(ws, tmp_path):
    other = Workspace.from_root(ws.root, tmp_path / "other")
    build(other, ["hhw"], threads=1, force=True)  # ws was built with two threads (hhw: the corpus of many streams)
    for stage in ("ingest", "store", "tasks", "episodes", "audit", "release"):
        a, b = ws.stage_dir("hhw", stage), other.stage_dir("hhw", stage)
        assert compare_folders(a, b) == [], f"hhw/{stage}"
        assert any(a.iterdir())


def test_corpora_built_at_once_give_what_one_after_the_other_gives(ws, tmp_path):
    """ws was built with both corpora at once (one worker each); one worker builds them stage by stage, every
    corpus's ingest before any store. The outcomes come back in corpus, then stage order either way, and every output
    is the same."""
    from pipeline.core.resources import Resources

    other = Workspace.from_root(ws.root, tmp_path / "other")
    seen = []
    outcomes = build(other, until="store", force=True, resources=Resources(workers=1), on_done=seen.append)
    order = [(o.corpus, o.stage) for o in outcomes]
    assert order == [(c, s) for c in ("hhw", "xai4heat") for s in ("ingest", "store")]
    assert [o.stage for o in seen] == ["ingest", "ingest", "store", "store"]
    assert sorted((o.corpus, o.stage) for o in seen) == order
    for corpus in ("hhw", "xai4heat"):
        for stage in ("ingest", "store"):
            assert compare_folders(ws.stage_dir(corpus, stage), other.stage_dir(corpus, stage)) == [], (corpus, stage)
    concurrent = build(ws, until="store", force=True, resources=Resources(workers=2))
    assert [(o.corpus, o.stage) for o in concurrent] == order


def test_later_stages_of_corpora_in_spawned_processes_give_what_one_process_gives(ws, tmp_path, monkeypatch):
    """Two corpora with work after the store build their later stages in spawned processes (one each, on two
    workers): every stage's outcome is heard as it ends, they come back in corpus, then stage order, and every output
    is what this process wrote for ws."""
    from pipeline.core.resources import Resources
    from pipeline.harness import at_once
    from pipeline.harness import build as build_module

    monkeypatch.setattr(build_module, "SPAWN_OBSERVATIONS", 0)  # the tiny corpora too
    spawned = []
    real = at_once.in_processes

    def counted(job, items, names, runtime, on_done):
        spawned.append(list(names))
        return real(job, items, names, runtime, on_done)

    monkeypatch.setattr(at_once, "in_processes", counted)
    other = Workspace.from_root(ws.root, tmp_path / "other")
    heard = []
    outcomes = build(other, force=True, resources=Resources(workers=2), on_done=heard.append)
    assert [sorted(names) for names in spawned] == [["hhw", "xai4heat"]]
    stages = ("ingest", "store", "tasks", "episodes", "audit", "release")
    assert [(o.corpus, o.stage) for o in outcomes] == [(c, s) for c in ("hhw", "xai4heat") for s in stages]
    assert sorted((o.corpus, o.stage) for o in heard) == sorted((o.corpus, o.stage) for o in outcomes)
    for corpus in ("hhw", "xai4heat"):
        for stage in stages:
            assert compare_folders(ws.stage_dir(corpus, stage), other.stage_dir(corpus, stage)) == [], (corpus, stage)
    assert set(statuses(build(other, resources=Resources(workers=2))).values()) == {"cached"}
    assert len(spawned) == 1  # a corpus with nothing to build spawns no process


def test_a_failing_corpus_stops_the_build_with_its_own_error(ws, monkeypatch):
    """Corpora build at once: the failure of one is raised (one line), the other ends the stage it is in."""
    from pipeline.core.errors import StageError
    from pipeline.core.resources import Resources
    from pipeline.harness import build as build_module

    real = build_module._store_run

    def failing(ctx, out):
        if ctx.corpus == "xai4heat":
            raise StageError("xai4heat: the store failed on purpose")
        return real(ctx, out)

    monkeypatch.setattr(
        build_module,
        "STAGES",
        tuple(dataclasses.replace(s, run=failing) if s.name == "store" else s for s in build_module.STAGES),
    )
    with pytest.raises(StageError, match="xai4heat: the store failed on purpose"):
        build(ws, force=True, resources=Resources(workers=2))
    assert (ws.stage_dir("hhw", "ingest") / MANIFEST).is_file()


def test_store_is_read_only(ws):
    path = ws.stage_dir("xai4heat", "store") / STORE_FILE
    assert not os.access(path, os.W_OK) or os.geteuid() == 0
    assert oct(path.stat().st_mode & 0o777) == "0o444"
    assert not path.with_name(STORE_FILE + ".wal").exists()
    con = open_store(path)
    with pytest.raises(duckdb.Error, match="read-only"):
        con.execute("CREATE TABLE x (a INTEGER)")
    with pytest.raises(duckdb.Error, match="read-only"):
        con.execute("DELETE FROM observations")
    con.close()


def test_build_json_cli(ws):
    result = CliRunner().invoke(main, ["--root", str(ws.root), "build", "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)  # notes (streams left out, gates) go to stderr
    assert [(r["corpus"], r["stage"], r["status"]) for r in rows] == [
        (corpus, stage, "cached")
        for corpus in ("hhw", "xai4heat")
        for stage in ("ingest", "store", "tasks", "episodes", "audit", "release")
    ]
    assert all(isinstance(r["seconds"], float) for r in rows)


def test_inspect_store_cli(ws):
    result = CliRunner().invoke(main, ["--root", str(ws.root), "inspect", "store", "--corpus", "xai4heat", "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    assert summary["raw_value_cells"] == (len(TINY_XAI.splitlines()) - 1) * 8
    assert summary["observations"] + sum(summary["rejects_by_reason"].values()) == summary["raw_value_cells"]
    assert set(summary["thresholds"]) == {
        "coverage_abstain",
        "coverage_answer",
        "gap_ratio_answer",
        "gap_ratio_abstain_window",
        "gap_ratio_abstain_stream",
    }
    assert summary["quality"]["streams"]


def test_store_file_holds_what_the_manifest_digests(ws):
    from pipeline.store.build import logical_digests

    folder = ws.stage_dir("hhw", "store")
    manifest = json.loads((folder / MANIFEST).read_text())
    assert logical_digests(folder / STORE_FILE) == manifest["logical_digests"]


def test_tool_registry_version_enters_the_identity_of_stages_that_use_tools(ws, monkeypatch):
    from pipeline.harness import build as build_module
    from pipeline.tools import registry

    mapping = build_module.load_mapping(ws.corpus_config("xai4heat"))
    ctx = build_module.Context(
        ws=ws,
        mapping=mapping,
        config=build_module.load_build_config(ws),
        resources=build_module.Resources(),
        raw=build_module.raw_folder(ws, mapping),
    )
    store_stage = build_module.STAGES[1]
    user = build_module.Stage("uses", (), (), store_stage.identity, store_stage.run, uses_tools=True)
    before = (build_module.identity_of(user, ctx).cache_key, build_module.identity_of(store_stage, ctx).cache_key)
    monkeypatch.setattr(registry, "SEMANTICS_VERSION", registry.SEMANTICS_VERSION + 1)
    after = (build_module.identity_of(user, ctx).cache_key, build_module.identity_of(store_stage, ctx).cache_key)
    assert before[0] != after[0] and before[1] == after[1]


def test_an_edit_of_the_parquet_writer_that_keeps_its_bytes_rebuilds_only_its_importers(ws, monkeypatch):
    """Code identity is the import closure: ingest and store import the Parquet writer and rebuild; tasks, episodes and
    audit do not import it and their inputs are unchanged, and the release depends on upstream data, not upstream
    code."""
    from pipeline.core import manifest

    real, writer = manifest.digest_file, (REPO / "pipeline" / "ingest" / "parquet.py").resolve()
    monkeypatch.setattr(
        manifest, "digest_file", lambda path: real(path) + ("-edited" if Path(path).resolve() == writer else "")
    )
    result = statuses(build(ws))
    for corpus in ("hhw", "xai4heat"):
        assert [result[(corpus, s)] for s in ("ingest", "store")] == ["built", "built"]
        assert [result[(corpus, s)] for s in ("tasks", "episodes", "audit", "release")] == ["cached"] * 4


def test_a_damaged_or_edited_store_is_rebuilt_and_says_why(ws, tmp_path):
    """store.duckdb is not byte-identical between builds, so manifest.json holds no digest of it: its size and xxh3 are
    recorded beside it (outputs.local.json) and checked before the stage is said cached."""
    path = ws.stage_dir("xai4heat", "store") / STORE_FILE
    arguments = ["--root", str(ws.root), "tool", "lookup_observation", "--corpus", "xai4heat", "--args"]
    call = json.dumps({"stream_id": "L8__t_sup_prim", "timestamp": "2022-01-10T10:24:00+01:00", "mode": "nearest"})
    genuine = json.loads(CliRunner().invoke(main, [*arguments, call]).output)
    assert isinstance(genuine["value"], float), genuine
    edited = tmp_path / "edited.duckdb"
    shutil.copyfile(path, edited)
    edited.chmod(0o644)
    with duckdb.connect(str(edited)) as con:
        con.execute("UPDATE observations SET value = value + 1000")
    for replacement in (b"garbage" * 10_000, edited.read_bytes()):
        path.chmod(0o644)
        path.write_bytes(replacement)
        result = CliRunner().invoke(main, ["--root", str(ws.root), "build", "--corpus", "xai4heat"])
        assert result.exit_code == 0, result.output
        assert "xai4heat     store      built" in result.output
        assert (
            "xai4heat     store      info: rebuilt: store.duckdb differs from its size and xxh3 in outputs.local.json"
            in result.output
        )
        assert json.loads(CliRunner().invoke(main, [*arguments, call]).output) == genuine


def test_a_damaged_store_is_one_line_for_the_tools(ws):
    path = ws.stage_dir("xai4heat", "store") / STORE_FILE
    path.chmod(0o644)
    path.write_bytes(b"garbage" * 10_000)
    result = CliRunner().invoke(main, ["--root", str(ws.root), "tool", "list_points", "--corpus", "xai4heat"])
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result.output
    # checked against the stage's record before it is opened (issue 53): one line naming it, and the fix
    assert result.output.startswith("error: ") and result.output.count("\n") == 1, result.output
    assert "store.duckdb: store.duckdb differs from its size and xxh3" in result.output
    assert "rebuild it with `telemetry-bench build --corpus xai4heat`" in result.output
    # a file that is no DuckDB store, opened without a record to check it against, is one line too
    from pipeline.core.errors import StageError

    with pytest.raises(StageError, match="store.duckdb: cannot be opened as a tool store"):
        open_store(path)


def test_an_unchanged_build_is_told_from_the_recorded_state_without_the_stages(ws):
    """The first CLI build records what it read and wrote (artifacts/.build-state.json); the next one, in a fresh
    process, reports every stage cached as the full check does without importing the harness or the stages; a
    rewrite with the same bytes keeps it so, an edit of a raw file rebuilds."""
    import subprocess
    import sys

    probe = (
        "import json, sys\nfrom pipeline.cli import main\n"
        f"main(['--root', {str(ws.root)!r}, 'build', '--json', *sys.argv[1:]], standalone_mode=False)\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith(('pipeline.harness', 'pipeline.store', "
        "'pipeline.tasks', 'pydantic')))), file=sys.stderr)\n"
    )

    def fresh_process(*extra: str) -> tuple[list, list]:
        done = subprocess.run(
            [sys.executable, "-c", probe, *extra], capture_output=True, text=True, cwd=REPO, check=True
        )
        return json.loads(done.stdout), json.loads(done.stderr.splitlines()[-1])

    # the first build in a fresh process too, as a user's runs are: the state is valid for one interpreter and import
    # path, and a test run before this one in the same worker may have moved this process's (an agent plugin puts the
    # working folder first)
    first, _ = fresh_process()
    rows, imported = fresh_process()
    assert imported == []
    assert [(r["corpus"], r["stage"], r["status"]) for r in rows] == [
        (o["corpus"], o["stage"], "cached") for o in first
    ]
    raw = ws.root / "data/raw/xai4heat/xai4heat_scada_L8.csv"
    raw.write_bytes(raw.read_bytes())  # new times, same bytes
    rows, imported = fresh_process()
    assert imported == [] and {r["status"] for r in rows} == {"cached"}
    raw.write_text("\n".join(raw.read_text().splitlines()[:-1]) + "\n")
    rows, imported = fresh_process("--until", "ingest")  # what the edit rebuilds first; the later stages: not asked
    assert "pipeline.harness.build" in imported
    assert ("xai4heat", "ingest", "built") in [(r["corpus"], r["stage"], r["status"]) for r in rows]


def test_a_copied_artifacts_folder_is_checked_as_itself(ws, tmp_path):
    """The recorded state names its files by absolute path: a copy of the artifacts folder, state and all, built with
    --artifacts, is checked against its own files (a stage missing from the copy is built there), never reported
    cached because the original's files are intact."""

    def cli_build(*extra: str) -> list[tuple[str, str, str]]:
        result = CliRunner().invoke(main, ["--root", str(ws.root), *extra, "build", "--json"])
        assert result.exit_code == 0, result.output
        return [(r["corpus"], r["stage"], r["status"]) for r in json.loads(result.stdout)]

    cli_build()  # records the state
    assert {status for _, _, status in cli_build()} == {"cached"}
    assert (ws.artifacts_dir / ".build-state.json").is_file()
    copy = tmp_path / "copy"
    shutil.copytree(ws.artifacts_dir, copy, symlinks=True)
    shutil.rmtree(copy / "xai4heat" / "release")
    rows = cli_build("--artifacts", str(copy))
    assert ("xai4heat", "release", "built") in rows and ("hhw", "release", "cached") in rows
    assert (copy / "xai4heat" / "release" / "release.json").is_file()
    assert {status for _, _, status in cli_build()} == {"cached"}  # the original's own state still holds


def test_a_relative_raw_folder_is_the_one_it_names_from_the_working_folder(ws, tmp_path, monkeypatch):
    """A raw folder given as a relative path (--raw, or a corpus's raw_env variable) is read from the working folder:
    the same words from another folder name other data, which the next build reads, never reporting the first
    folder's stages cached."""
    config = ws.corpus_config("xai4heat")
    config.write_text(config.read_text().replace('name = "xai4heat"', 'name = "xai4heat"\nraw_env = "TB_TEST_RAW"', 1))
    original = ws.root / "data" / "raw" / "xai4heat" / "xai4heat_scada_L8.csv"
    for here, lines in (("a", None), ("b", -40)):
        (tmp_path / here / "raw").mkdir(parents=True)
        kept = original.read_text().splitlines()[:lines]
        (tmp_path / here / "raw" / original.name).write_text("\n".join(kept) + "\n")

    def ingest(*extra: str) -> str:
        result = CliRunner().invoke(main, ["--root", str(ws.root), "build", "--corpus", "xai4heat", "--until",
                                           "ingest", "--json", *extra])  # fmt: skip
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)[0]["status"]

    for given in (("--raw", "raw"), ()):  # the option, then the variable
        monkeypatch.delenv("TB_TEST_RAW", raising=False)
        if not given:
            monkeypatch.setenv("TB_TEST_RAW", "raw")
        monkeypatch.chdir(tmp_path / "a")
        ingest(*given)
        assert ingest(*given) == "cached"
        monkeypatch.chdir(tmp_path / "b")  # the same words, other data
        assert ingest(*given) == "built"
        assert ingest(*given) == "cached"


def test_a_raw_or_config_folder_behind_a_link_is_read_where_the_link_points(ws, tmp_path):
    """The raw folder of a corpus kept outside the project defaults to data/raw/<name>, read through a link to its
    target: the link moved, the next build reads the other data. A linked folder inside configs/ is read through too:
    no state is recorded over it, so an edit behind it is never reported cached."""
    config = ws.corpus_config("xai4heat")
    config.write_text(config.read_text().replace('name = "xai4heat"', 'name = "xai4heat"\nraw_env = "TB_UNSET_RAW"', 1))
    raw = ws.root / "data" / "raw" / "xai4heat"
    original = raw / "xai4heat_scada_L8.csv"
    for here, lines in (("a", None), ("b", -40)):
        (tmp_path / here).mkdir()
        (tmp_path / here / original.name).write_text("\n".join(original.read_text().splitlines()[:lines]) + "\n")
    shutil.rmtree(raw)
    raw.symlink_to(tmp_path / "a", target_is_directory=True)

    def statuses(corpus: str) -> dict[str, str]:
        result = CliRunner().invoke(main, ["--root", str(ws.root), "build", "--corpus", corpus, "--until", "store",
                                           "--json"])  # fmt: skip
        assert result.exit_code == 0, result.output
        return {r["stage"]: r["status"] for r in json.loads(result.stdout)}

    statuses("xai4heat")
    assert statuses("xai4heat")["ingest"] == "cached" and (ws.artifacts_dir / ".build-state.json").is_file()
    raw.unlink()
    raw.symlink_to(tmp_path / "b", target_is_directory=True)
    assert statuses("xai4heat")["ingest"] == "built"

    corpora = ws.root / "configs" / "corpora"
    shutil.move(corpora, tmp_path / "corpora")
    corpora.symlink_to(tmp_path / "corpora", target_is_directory=True)
    statuses("hhw")
    assert statuses("hhw") == {"ingest": "cached", "store": "cached"}
    mapping = tmp_path / "corpora" / "hhw.toml"
    bound = "Outside_Air_Temperature_Sensor = [-50.0, 60.0]"
    mapping.write_text(mapping.read_text().replace(bound, "Outside_Air_Temperature_Sensor = [-50.0, 5.0]"))
    assert statuses("hhw")["ingest"] == "built"


def test_a_build_to_the_store_never_imports_pandas(ws):
    """pyarrow imports pandas (0.3 s, under the GIL) the first time it converts a Python or numpy value: ingest and
    store build their arrays from buffers instead (pipeline/core/arrow.py), so a whole build to the store, in a fresh
    process as a user's is, never loads it."""
    import subprocess
    import sys

    probe = (
        "import sys\nfrom pipeline.cli import main\n"
        f"main(['--root', {str(ws.root)!r}, 'build', '--until', 'store', '--force', '--json'], standalone_mode=False)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'pandas'), file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPO, check=True)
    assert {(r["corpus"], r["stage"], r["status"]) for r in json.loads(done.stdout)} == {
        (c, s, "built") for c in ("hhw", "xai4heat") for s in ("ingest", "store")
    }
    assert done.stderr.splitlines()[-1] == "[]"


def test_a_build_told_from_the_recorded_state_says_what_the_full_check_says(ws):
    """The stage lines, their notes and the summary (rows, gates, guessers, digest) of a build told from the recorded
    state are those of the full identity check (the state keeps what the report reads of each manifest)."""
    import re
    import subprocess
    import sys

    probe = (
        "import sys\nfrom pipeline.cli import main\n"
        f"main(['--root', {str(ws.root)!r}, 'build', '--verbose'], standalone_mode=False)\n"
        "print('imported', 'pipeline.harness.build' in sys.modules, file=sys.stderr)\n"
    )

    def said() -> tuple[list[str], str]:
        done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPO, check=True)
        lines = [re.sub(r"\d+\.\d+s", "Ts", line) for line in (done.stdout + done.stderr).splitlines()]
        return [line for line in lines if not line.startswith("imported")], lines[-1]

    full, full_imported = said()  # the full check (this interpreter and path record the state for the next)
    told, told_imported = said()
    assert (full_imported, told_imported) == ("imported True", "imported False")
    assert sorted(told) == sorted(full)  # the full check's stage lines come as corpora building at once end them
    assert any("released" in line for line in told) and any("guessers vs majority" in line for line in told)
    assert any("note: " in line for line in told)
