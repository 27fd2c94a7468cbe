import os

import pytest

# Tests never draw progress bars.
os.environ.setdefault("TELEMETRY_BENCH_QUIET", "1")


@pytest.fixture
def xai_slice():
    from tests.helpers import real_lines

    return real_lines
