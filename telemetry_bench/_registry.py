"""inspect_ai's entry point (pyproject.toml, group `inspect_ai`): one task per corpus of the project,
`inspect eval telemetry_bench/<corpus>`, and `telemetry_bench/release` for any release folder (docs/inspect.md).

inspect_ai names a task by the package that defines it, so the tasks are made here, in `telemetry_bench`; what they
do is pipeline.harness.inspect_task.
"""

from __future__ import annotations

from inspect_ai import Task, task
from inspect_ai._util.package import get_installed_package_name
from inspect_ai.model import modelapi

from pipeline.harness.inspect_task import corpora, episode_source_for, episodes_task


def namespaced(name: str) -> str:
    """The name to register a task under so that inspect knows it as `telemetry_bench/<name>`: inspect prefixes the
    package itself when it sees the package installed, but not from the checkout's own folder, where setuptools'
    telemetry_bench.egg-info hides the installed metadata; there the prefix is given."""
    return name if get_installed_package_name(namespaced) else f"telemetry_bench/{name}"


@task(name=namespaced("release"))
def release(
    release: str | None = None,
    split: str = "test",
    cache_dir: str | None = None,
    corpus: str | None = None,
    expect: str | None = None,
) -> Task:
    """The episodes of a split of a release folder, played on its own: `-T release=PATH -T split=test`, refused
    unless its digest is `-T expect=sha256:...` when given."""
    return episodes_task(episode_source_for(corpus, split, release, cache_dir=cache_dir, expect=expect))


def corpus_task(corpus: str):
    """The task of one corpus: a split of its build (`-T root=PATH`, `-T artifacts=PATH`) or of a release folder
    (`-T release=PATH`, or `-T releases=FOLDER` holding one per corpus: what an eval-set of several corpora gives)."""

    def play(
        split: str = "test",
        release: str | None = None,
        root: str | None = None,
        artifacts: str | None = None,
        cache_dir: str | None = None,
        releases: str | None = None,
        expect: str | None = None,
    ) -> Task:
        return episodes_task(episode_source_for(corpus, split, release, root, artifacts, cache_dir, releases, expect))

    play.__doc__ = f"The {corpus} episodes of a split: `inspect eval telemetry_bench/{corpus} -T split=test`."
    return task(name=namespaced(corpus))(play)


TASKS = {name: corpus_task(name) for name in corpora()}


@modelapi(name="telemetry_bench")
def oracle():
    """`--model telemetry_bench/oracle`: the gold path, offline (pipeline/harness/inspect_oracle.py)."""
    from pipeline.harness.inspect_oracle import OracleAPI

    return OracleAPI
