import os
import shutil
from pathlib import Path

import pytest

from pipeline.core.allocator import collect_less

# The test workers collect cyclic garbage as the commands do (a test calls them in its own process).
collect_less()

# Tests never draw progress bars.
os.environ.setdefault("TELEMETRY_BENCH_QUIET", "1")
# Nor do they follow a developer's build settings: parts at a URL, an executor, a worker's thread share.
for _name in (
    "TELEMETRY_BENCH_PARTS",
    "TELEMETRY_BENCH_EXECUTOR",
    "TELEMETRY_BENCH_RAY_ADDRESS",
    "TELEMETRY_BENCH_WORKER_THREADS",
):
    os.environ.pop(_name, None)


@pytest.fixture
def xai_slice():
    from tests.helpers import real_lines

    return real_lines


@pytest.fixture(scope="session")
def real_artifacts(tmp_path_factory, request):
    """Every shipped corpus built once (ingest to release) into a temporary artifacts folder, which tests only read,
    starting from the project's own build when `make build` made one (`_seed`: its stages are then cached).

    Under pytest-xdist the workers share one folder in the run's common base temp folder, and each builds the corpora
    one build per corpus, starting from a different one: the build's own corpus lock makes a worker that reaches a
    corpus another is building wait for it and then find it cached, so the corpora build at once on different workers,
    each once. (One build of all corpora holds every corpus's lock until it ends.)"""
    from click.testing import CliRunner

    from pipeline.cli import main
    from pipeline.core.config import corpus_names, load_mapping
    from pipeline.core.workspace import Workspace
    from pipeline.harness.build import raw_folder
    from tests.helpers import REPO

    worker = getattr(request.config, "workerinput", None)
    if worker is None:  # one process (no pytest-xdist workers)
        folder = tmp_path_factory.mktemp("real-artifacts")
    else:
        folder = tmp_path_factory.getbasetemp().parent / "real-artifacts"  # above each worker's own base temp folder
        folder.mkdir(exist_ok=True)
    ws = Workspace.from_root(REPO, folder)
    if worker is None:
        builds = [[]]
    else:
        names = [name for name in corpus_names(ws) if raw_folder(ws, load_mapping(ws.corpus_config(name)))]
        turn = int(worker["workerid"].removeprefix("gw")) % max(1, len(names))
        builds = [["--corpus", name] for name in names[turn:] + names[:turn]]  # one build (and lock) per corpus
    for corpora in builds:
        for name in corpora[1:] or corpus_names(ws):
            _seed(REPO / "artifacts" / name, folder / name)
        result = CliRunner().invoke(main, ["--root", str(REPO), "--artifacts", str(folder), "build", *corpora])
        assert result.exit_code == 0, result.output
    return folder


def _seed(built: Path, target: Path) -> None:
    """Start a corpus from the project's own build of it when `make build` has made one (a fresh clone's `make build`
    then `make test`): the suite's build finds those stages cached, since identities hold no paths and a stage is
    cached only when its identity and every output's size and xxh3 match; a stale or damaged stage is built again.
    Without one, the corpus is built from its raw files. The copy moves in whole or not at all (a worker that finds
    the corpus there already leaves it)."""
    from pipeline.core.manifest import MANIFEST

    if target.exists() or not (built / "store" / MANIFEST).is_file():
        return
    staging = target.with_name(f".seed-{target.name}-{os.getpid()}")
    shutil.copytree(built, staging, symlinks=True, ignore=shutil.ignore_patterns(".build.lock", ".*.tmp-*", ".*.old-*"))
    try:
        staging.rename(target)
    except OSError:  # another worker's copy or build got there first
        shutil.rmtree(staging, ignore_errors=True)


@pytest.fixture
def release(real_artifacts, tmp_path, request):
    """A copy of a built release, the test's own to change: xai4heat's, or the test module's RELEASE_CORPUS (such as
    tests.helpers.SMALLEST)."""
    folder = tmp_path / "release"
    shutil.copytree(real_artifacts / getattr(request.module, "RELEASE_CORPUS", "xai4heat") / "release", folder)
    return folder


@pytest.fixture(scope="session")
def xai_store(real_artifacts):
    """The built xai4heat tool store, opened read-only once for the session."""
    from pipeline.tools.access import ToolStore

    opened = ToolStore(real_artifacts / "xai4heat" / "store" / "store.duckdb")
    yield opened
    opened.close()


BUILDS = {"real_artifacts"}  # fixtures that build whole corpora: a test that uses one (directly or not) is slow


def pytest_collection_modifyitems(config, items):
    """`make test-fast` (-m "not slow") skips every test that needs a built corpus, besides those marked by hand.
    (Under make test, pytest-xdist sends each module whole to one worker, --dist loadfile: a module's session fixtures
    are made once.)"""
    for item in items:
        if BUILDS & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)


def pytest_sessionstart(session):
    """Say the order the suite runs in, quiet mode included, so that a failure found in a random order can be
    replayed."""
    config = session.config
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None:
        return
    if config.pluginmanager.hasplugin("randomly") and isinstance(getattr(config.option, "randomly_seed", None), int):
        reporter.write_line(f"random test order: replay with --randomly-seed={config.option.randomly_seed}")
    else:
        reporter.write_line("test order: as in the files (-p no:randomly)")


@pytest.fixture(autouse=True)
def _temporary_files_of_the_tests_own(tmp_path_factory, monkeypatch):
    """Code under test that asks for a temporary folder (tempfile) gets a fresh one of this test's, under pytest's
    base temp (beside the test's tmp path, which stays as the test made it), subprocesses too."""
    import tempfile

    folder = tmp_path_factory.mktemp("tempfile")
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    monkeypatch.setenv("TMPDIR", str(folder))
