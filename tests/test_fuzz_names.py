"""Text from outside written into files people open (issue 53): any agent name stays one Markdown table cell with no
raw markup, and a CSV cell never starts a formula; any price-table text nested past the bound is refused in one line
before tomllib reads it, and nesting within it parses as tomllib parses it. Few examples in make test, many in
make fuzz."""

from __future__ import annotations

import csv
import io
import tomllib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipeline.core.errors import ConfigError
from pipeline.core.toml_text import MAX_TOML_DEPTH, read_toml, toml_depth
from pipeline.harness.leaderboard import FORMULA_STARTS, _md, csv_text
from tests.helpers import fuzz_settings

HOSTILE = st.text(alphabet=st.sampled_from(list("|\n\r\t<>&\"'=+-@\\`*_#ab \u2028\x0b")), max_size=40) | st.text()


@pytest.mark.fuzz
@fuzz_settings(300, 20000)
@given(HOSTILE)
def test_a_name_is_one_markdown_cell_and_never_a_formula(name):
    cell = _md(name)
    assert "|" not in cell and "<" not in cell and ">" not in cell and len(cell.splitlines()) <= 1
    (row,) = csv.DictReader(io.StringIO(csv_text(("agent",), [{"agent": name}]), newline=""))
    read = [row["agent"]]
    assert not read[0].startswith(FORMULA_STARTS) and read[0] in (name, f"'{name}")


def nested(depth: int, inline: bool) -> str:
    return "x = " + ("{a = " * depth + "1" + "}" * depth if inline else "[" * depth + "]" * depth) + "\n"


@pytest.mark.fuzz
@fuzz_settings(50, 2000)
@given(st.integers(1, 20_000), st.booleans(), st.sampled_from(["", "# [[[\n", 's = "[[[{{"\n', "t = '''[\n{'''\n"]))
def test_a_price_table_parses_or_is_one_line(tmp_path_factory, depth, inline, before):
    path = tmp_path_factory.mktemp("prices") / "prices.toml"
    text = before + nested(depth, inline)
    path.write_text(text, encoding="utf-8")
    assert toml_depth(text) == depth
    if depth > MAX_TOML_DEPTH:
        with pytest.raises(ConfigError, match=f"nested deeper than {MAX_TOML_DEPTH} levels"):
            read_toml(path)
    else:
        assert read_toml(path) == tomllib.loads(text)
