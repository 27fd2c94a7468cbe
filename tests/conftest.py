import os

import pytest

# Tests never draw progress bars.
os.environ.setdefault("TELEMETRY_BENCH_QUIET", "1")


@pytest.fixture
def xai_slice():
    from tests.helpers import real_lines

    return real_lines


@pytest.fixture(scope="session")
def real_artifacts(tmp_path_factory):
    """Both shipped corpora built once (ingest and store) into a temporary artifacts folder."""
    from click.testing import CliRunner

    from pipeline.cli import main
    from tests.helpers import REPO

    folder = tmp_path_factory.mktemp("real-artifacts")
    result = CliRunner().invoke(main, ["--root", str(REPO), "--artifacts", str(folder), "build"])
    assert result.exit_code == 0, result.output
    return folder


@pytest.fixture(scope="session")
def xai_store(real_artifacts):
    """The built xai4heat tool store, opened read-only once for the session."""
    from pipeline.tools.access import ToolStore

    opened = ToolStore(real_artifacts / "xai4heat" / "store" / "store.duckdb")
    yield opened
    opened.close()
