"""A mapping's regexes are matched within a time bound: a pattern that backtracks without end is one error line."""

from __future__ import annotations

import pytest

from pipeline.core import patterns
from pipeline.core.errors import ConfigError
from pipeline.ingest.paths import file_groups


def test_a_regex_over_its_time_bound_is_one_line_naming_the_key(monkeypatch):
    monkeypatch.setattr(patterns, "MATCH_SECONDS", 0.05)
    with pytest.raises(ConfigError, match=r"values\.file_pattern '\(a\|aa\)\+b' took over 0\.05 s") as caught:
        file_groups("a" * 5000, "(a|aa)+b")
    assert "\n" not in str(caught.value)


def test_named_groups_match_as_before():
    assert file_groups("b1/xai4heat_scada_L4.csv", r"b1/xai4heat_scada_(?P<site>L\d+)\.csv") == {"site": "L4"}
    assert patterns.fullmatch(r"x\d+", "x12y", "what") is None
