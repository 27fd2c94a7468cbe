"""A corpus's [splits] that breaks the split rule (issue 52): the build refuses it in one line naming the mapping, the
field, the rule and the fix, before any stage runs (a pydantic traceback before)."""

from __future__ import annotations

import pytest

from contracts.tasks import SplitOverrides
from pipeline.core.config import load_families
from pipeline.core.errors import ConfigError
from pipeline.core.workspace import Workspace
from pipeline.tasks.fit import corpus_rule
from tests.helpers import REPO
from tests.test_one_building import building, cli

FAMILIES = load_families(Workspace.from_root(REPO))


@pytest.mark.parametrize(
    ("overrides", "field", "fix"),
    [
        (SplitOverrides(buffer_days=10), "buffer_days", "set buffer_days = 73 or more, or reach_days = 0 or less"),
        (SplitOverrides(reach_days=30), "reach_days", "set buffer_days = 91 or more, or reach_days = 26 or less"),
        (SplitOverrides(shares={"train": 0.5, "dev": 0.2, "test": 0.2}), "(top level)", "fix the key in [splits]"),
    ],
)
def test_a_splits_table_that_breaks_a_rule_is_one_line(overrides, field, fix):
    with pytest.raises(ConfigError) as info:
        corpus_rule(FAMILIES, overrides, "c")
    message = str(info.value)
    assert "\n" not in message and message.startswith("configs/corpora/c.toml: [splits]"), message
    assert field in message and fix in message, message
    if field != "(top level)":
        assert "breaks the buffer rule" in message and "longest window, 31 days, + 2 x reach_days" in message


def test_defaults_and_fitting_overrides_pass():
    assert corpus_rule(FAMILIES, None, "c") == FAMILIES.splits
    assert corpus_rule(FAMILIES, SplitOverrides(buffer_days=90), "c").buffer_days == 90


def test_build_refuses_a_broken_splits_table_in_one_line_before_ingest(tmp_path):
    root, name = tmp_path / "p", "bad"
    building(root, name, 1, 10, sensors=("temperature",))
    mapping = root / "configs" / "corpora" / f"{name}.toml"
    mapping.write_text(mapping.read_text(encoding="utf-8") + "\n[splits]\nbuffer_days = 10\n", encoding="utf-8")
    built = cli(root, "build", "--corpus", name)
    assert built.exit_code != 0 and "Traceback" not in built.output, built.output
    errors = [line for line in built.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, built.output
    assert f"configs/corpora/{name}.toml: [splits] buffer_days: buffer_days = 10 with reach_days = 21" in errors[0]
    assert "set buffer_days = 73 or more" in errors[0]
    assert not (root / "artifacts" / name / "ingest").exists()  # refused before any stage ran
