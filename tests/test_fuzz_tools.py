"""Random JSON through every tool (issue 25): each call is a result of the tool's output model or a typed error
result, never an exception; the store is never changed. Few examples in make test, many in make fuzz."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contracts.tools import ToolError
from pipeline.core.canonical import digest_file
from pipeline.tools import registry
from tests.helpers import fuzz_settings

SCALARS = st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False) | st.text(max_size=40)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
PLAUSIBLE = st.sampled_from(
    [
        "L8",
        "L8__t_sup_prim",
        "Leaving_Hot_Water_Temperature_Sensor",
        "primary loop",
        "nearest",
        "exact",
        "2022-01-10T10:24:00+01:00",
        "2022-01-10",
        "2022-01-10T10:24:00",
        "1e400",
        "",
        "$c1.stream_id",
        "$c9.x[3]",
        "week",
        "day",
        "'; DROP TABLE observations; --",
    ]
)


def arguments_of(tool) -> st.SearchStrategy:
    """Objects over the tool's own argument names (plausible or random values), or any JSON at all."""
    names = sorted(tool.input_schema().get("properties", {}))
    keyed = (
        st.dictionaries(st.sampled_from(names) | st.text(max_size=6), PLAUSIBLE | VALUES, max_size=len(names) + 1)
        if names
        else VALUES
    )
    return keyed | VALUES


@pytest.mark.fuzz
def test_random_json_through_every_tool_is_a_result_or_a_typed_error(xai_store):
    before = digest_file(xai_store.path)
    outputs = {"c1": {"stream_id": "L8__t_sup_prim", "x": [1, 2]}}

    @fuzz_settings(60, 1500)
    @given(st.sampled_from(registry.TOOLS), st.data())
    def call(tool, data):
        arguments = data.draw(arguments_of(tool), label="arguments")
        result = registry.call(xai_store, tool.name, arguments, outputs)
        json.dumps(result, allow_nan=False)  # a JSON-ready result
        if result.get("error") is True:
            ToolError.model_validate(result)
        else:
            tool.output_model.model_validate(result)

    call()
    assert digest_file(xai_store.path) == before


@pytest.mark.fuzz
def test_unknown_tools_and_non_objects_are_typed_errors(xai_store):
    @fuzz_settings(30, 300)
    @given(st.text(max_size=20) | st.sampled_from([t.name for t in registry.TOOLS]), VALUES)
    def call(name, arguments):
        result = registry.call(xai_store, name, arguments)
        if name not in {t.name for t in registry.TOOLS}:
            assert result["code"] == "unknown_tool"
        elif not isinstance(arguments, dict):
            assert result["code"] == "invalid_argument"
        if result.get("error") is True:
            ToolError.model_validate(result)

    call()
