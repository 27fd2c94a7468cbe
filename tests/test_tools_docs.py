"""docs/tools.md names exactly the arguments the tool schemas take: its table is generated from the registry, and a
check that reads the doc as a user would (independent of the generator) compares every name with the schemas."""

from __future__ import annotations

import json
import re

from pipeline.harness.schemas import doc_with_reference
from pipeline.harness.tool_docs import TOOLS_DOC
from pipeline.tools import registry
from tests.helpers import REPO

# The rows of docs/tools.md before the table was generated: `window` where the schemas take window_start/window_end.
OLD_ROWS = """
| compare_window | left_stream_id, right_stream_id, window, period, metric | both values, winning_stream_id, tie |
| rank_window | stream_ids, window, period, metric, order, top_k | ranked_streams, without_data |
| inspect_quality_window | stream_id, window, period | count, expected_count, coverage, quality_band |
"""


def schema_arguments() -> dict[str, set[str]]:
    return {tool.name: set(tool.input_schema()["properties"]) for tool in registry.TOOLS}


def documented_arguments(text: str) -> dict[str, set[str]]:
    """Tool -> the argument names of its row in a `| tool | arguments | ... |` table (backticks, `?` and the listed
    values after a name are not part of it)."""
    rows = {}
    for line in text.splitlines():
        cells = [cell.strip() for cell in re.split(r"(?<!\\)\|", line)[1:-1]] if line.startswith("| ") else []
        if cells and cells[0] in schema_arguments():
            rows[cells[0]] = {re.match(r"\W*(\w+)", part).group(1) for part in cells[1].split(",") if part.strip()}
    return rows


def mismatches(text: str) -> list[str]:
    documented, declared = documented_arguments(text), schema_arguments()
    problems = [f"{tool}: not in the doc's table" for tool in declared if tool not in documented]
    for tool, names in documented.items():
        if names != declared[tool]:
            problems.append(
                f"{tool}: doc has {sorted(names - declared[tool])}, misses {sorted(declared[tool] - names)}"
            )
    return problems


def test_every_documented_argument_is_a_schema_argument():
    assert mismatches((REPO / TOOLS_DOC).read_text(encoding="utf-8")) == []


def test_the_check_fails_on_the_old_window_text():
    problems = mismatches(OLD_ROWS)
    for tool in ("compare_window", "rank_window", "inspect_quality_window"):
        assert any(p.startswith(f"{tool}: doc has ['window'], misses ['window_end', 'window_start']") for p in problems)


def test_the_doc_examples_call_tools_with_schema_arguments():
    text = (REPO / TOOLS_DOC).read_text(encoding="utf-8")
    examples = re.findall(r"telemetry-bench tool (\w+) .*?--args '(\{.*?\})'", text)
    assert len(examples) >= 3
    declared = {tool.name: tool.input_schema() for tool in registry.TOOLS}
    for name, args in examples:
        keys = set(json.loads(args))
        assert keys <= set(declared[name]["properties"]), (name, keys)
        assert set(declared[name].get("required", [])) <= keys, (name, keys)


def test_the_committed_table_is_generated():
    text = (REPO / TOOLS_DOC).read_text(encoding="utf-8")
    assert doc_with_reference(text, TOOLS_DOC) == text, "run `telemetry-bench schemas`"
