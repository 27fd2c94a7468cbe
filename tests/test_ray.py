"""The Ray executor writes the bytes the local executor writes, and survives a worker that dies."""

from __future__ import annotations

import shutil
import tempfile

import pytest
import ray

from pipeline.core import ray_executor
from pipeline.core.resources import Resources
from pipeline.core.workspace import Workspace
from pipeline.harness.build import build
from pipeline.ingest import parquet
from pipeline.store.build import logical_digests
from pipeline.store.reader import STORE_FILE
from tests.helpers import REPO
from tests.test_partitions import _synthetic_site

# Starts a Ray instance and builds a corpus; the module's tests share one worker and one Ray instance.
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def local_ray():
    """A local Ray instance of 2 CPUs for the module; its folder is short (socket paths must fit in 107 bytes)."""
    folder = tempfile.mkdtemp(prefix="tbray", dir="/tmp")
    if ray.is_initialized():  # never another test's instance: this module's tests use their own
        ray.shutdown()
    ray.init(
        num_cpus=2,
        object_store_memory=ray_executor.OBJECT_STORE_FLOOR,
        include_dashboard=False,
        log_to_driver=False,
        _temp_dir=folder,
    )
    yield
    ray.shutdown()
    shutil.rmtree(folder, ignore_errors=True)


def _files(ws: Workspace, corpus: str) -> dict[str, bytes]:
    """Every ingest, store, tasks and episodes file a build wrote, the store file by its logical digests."""
    files = {}
    for stage in ("ingest", "store", "tasks", "episodes"):
        folder = ws.stage_dir(corpus, stage)
        if folder.is_dir():
            files.update(
                {
                    f"{stage}/{p.name}": p.read_bytes()
                    for p in sorted(folder.iterdir())
                    if p.name not in (STORE_FILE, "outputs.local.json")
                }
            )
            assert not (folder / ".parts").exists(), "parts must not outlive the stage"
    files["store/store.duckdb (logical)"] = repr(
        sorted(logical_digests(ws.stage_dir(corpus, "store") / STORE_FILE).items())
    ).encode()
    return files


def _differences(first: dict[str, bytes], second: dict[str, bytes]) -> list[str]:
    return sorted(name for name in first.keys() | second.keys() if first.get(name) != second.get(name))


def test_ray_writes_the_bytes_of_the_local_executor_and_of_one_partition(
    tmp_path, real_artifacts, local_ray, monkeypatch
):
    """xai4heat on Ray in 3 partitions (parts at a file:// URL), to episodes, its task families as Ray tasks too: the
    files of the session's one-partition build (families in one process), and of a local build in 3 partitions on 2
    spawned workers."""
    from pipeline.tasks import compile as tasks_compile

    monkeypatch.setattr(tasks_compile, "UNIT_OBSERVATIONS", 0)  # a small corpus too runs its families as units
    on_ray = Workspace.from_root(REPO, tmp_path / "ray")
    shared = tmp_path / "shared"  # the Ray tasks leave their parts at a URL (through fsspec), as on a cluster
    shared.mkdir()
    resources = Resources(partitions=3, workers=2, executor="ray", parts=f"file://{shared}")
    build(on_ray, ["xai4heat"], until="episodes", resources=resources)
    assert [p for p in shared.rglob("*")] == []
    ray_files = _files(on_ray, "xai4heat")
    assert any(name.startswith("episodes/") for name in ray_files)
    assert _differences(_files(Workspace.from_root(REPO, real_artifacts), "xai4heat"), ray_files) == []
    local = Workspace.from_root(REPO, tmp_path / "local")
    build(local, ["xai4heat"], until="store", resources=Resources(partitions=3, workers=2))
    assert (
        _differences(
            _files(local, "xai4heat"), {k: v for k, v in ray_files.items() if k.split("/")[0] in ("ingest", "store")}
        )
        == []
    )


def test_a_killed_ray_worker_is_retried_and_changes_nothing(tmp_path, monkeypatch, local_ray):
    monkeypatch.setattr(parquet, "ROW_GROUP_SIZE", 2_000)  # several row groups and a chunked digest
    marker = tmp_path / "killed-once"
    monkeypatch.setenv(ray_executor.KILL_ONCE_ENV, str(marker))
    on_ray = _synthetic_site(tmp_path / "ray")
    build(
        on_ray,
        ["bts"],
        until="store",
        resources=Resources(partitions=3, workers=2, executor="ray"),
        raw=str(tmp_path / "ray" / "raw"),
    )
    assert marker.exists(), "no worker was killed: the test tested nothing"
    monkeypatch.delenv(ray_executor.KILL_ONCE_ENV)
    one = _synthetic_site(tmp_path / "one")
    build(one, ["bts"], until="store", resources=Resources(partitions=1, workers=1), raw=str(tmp_path / "one" / "raw"))
    assert _differences(_files(one, "bts"), _files(on_ray, "bts")) == []


def test_an_unknown_executor_is_a_config_error():
    from pipeline.core.errors import ConfigError

    with pytest.raises(ConfigError, match="not one of local, ray"):
        Resources(executor="spark")
