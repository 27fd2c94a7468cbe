"""The tool registry: names, agent-facing descriptions, JSON Schemas, one call path, a version."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from contracts.tools import (
    AggregateWindowInput,
    AggregateWindowResult,
    CompareWindowInput,
    CompareWindowResult,
    InspectQualityInput,
    InspectQualityResult,
    InspectQualityWindowInput,
    InspectQualityWindowResult,
    ListPointsInput,
    ListPointsResult,
    LookupObservationInput,
    LookupObservationResult,
    RankWindowInput,
    RankWindowResult,
    ResolvePointInput,
    ResolvePointResult,
    ToolError,
)
from pipeline.core.canonical import canonical_json, digest_value
from pipeline.tools import functions, refs, rounding
from pipeline.tools.access import ToolStore

# Bump when a tool's behaviour changes without its schema changing (ties, rounding, matching rules).
SEMANTICS_VERSION = 1


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    input_model: type[BaseModel]
    output_model: type[BaseModel]
    function: Callable[[ToolStore, Any], BaseModel]

    def input_schema(self) -> dict:
        return self.input_model.model_json_schema()

    def output_schema(self) -> dict:
        ok, error = self.output_model.model_json_schema(), ToolError.model_json_schema()
        defs = {**ok.pop("$defs", {}), **error.pop("$defs", {}), self.output_model.__name__: ok, "ToolError": error}
        return {
            "title": f"{self.name} result",
            "anyOf": [{"$ref": f"#/$defs/{self.output_model.__name__}"}, {"$ref": "#/$defs/ToolError"}],
            "$defs": defs,
        }


TOOLS: tuple[Tool, ...] = (
    Tool(
        "resolve_point",
        "Find the stream id of a point from its site, point class and, when several streams share the class, its "
        "equipment (e.g. 'primary loop') or location. Returns every match; stream_id is set only for a unique match.",
        ResolvePointInput,
        ResolvePointResult,
        functions.resolve_point,
    ),
    Tool(
        "list_points",
        "List the points (streams) of a site with their class, equipment, location, unit and label, optionally "
        "filtered by point class, equipment type or location.",
        ListPointsInput,
        ListPointsResult,
        functions.list_points,
    ),
    Tool(
        "aggregate_window",
        "Count, mean, std (population), min and max of one stream over a window [window_start, window_end). "
        "period 'day', 'week' (Monday 00:00 UTC) or 'month' needs the calendar bounds in UTC; 'custom' takes any "
        "window.",
        AggregateWindowInput,
        AggregateWindowResult,
        functions.aggregate_window,
    ),
    Tool(
        "compare_window",
        "Compare two streams on one statistic over the same window; returns both values and the stream with the "
        "larger value (null on a tie).",
        CompareWindowInput,
        CompareWindowResult,
        functions.compare_window,
    ),
    Tool(
        "rank_window",
        "Rank streams on one statistic over the same window (ties: smaller stream id first); top_k results.",
        RankWindowInput,
        RankWindowResult,
        functions.rank_window,
    ),
    Tool(
        "lookup_observation",
        "The observation of a stream at a timestamp. mode 'exact' finds only an observation at that instant; "
        "'nearest' returns the closest one (a tie goes to the earlier) with its offset in seconds.",
        LookupObservationInput,
        LookupObservationResult,
        functions.lookup_observation,
    ),
    Tool(
        "inspect_quality",
        "Whole-stream data quality: cadence, longest gap, coverage, gap ratio, defect fractions, quality band and "
        "the corpus thresholds.",
        InspectQualityInput,
        InspectQualityResult,
        functions.inspect_quality,
    ),
    Tool(
        "inspect_quality_window",
        "Data quality of one stream over a window: count vs expected, coverage, gap ratio, defect fractions and the "
        "quality band (low_coverage, long_gap, healthy, marginal) from the corpus thresholds.",
        InspectQualityWindowInput,
        InspectQualityWindowResult,
        functions.inspect_quality_window,
    ),
)
BY_NAME = {tool.name: tool for tool in TOOLS}


def registry_version() -> str:
    """Identity of the toolset: names, descriptions, schemas, rounding and semantics version."""
    return digest_value([SEMANTICS_VERSION, rounding.VALUE_DP, rounding.OFFSET_DP, _schemas()])


@functools.lru_cache(maxsize=1)
def _schemas() -> list:
    # The models are fixed once imported; every stage of every corpus asks for the version again.
    return [[t.name, t.description, t.input_schema(), t.output_schema()] for t in TOOLS]


def _error(code: str, message: str, argument: str | None = None) -> dict:
    return ToolError(code=code, message=message, argument=argument).model_dump(mode="json")


def _validation_error(exc: ValidationError) -> dict:
    first = exc.errors()[0]
    where = ".".join(str(part) for part in first["loc"]) or None
    problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}" for e in exc.errors())
    return _error("invalid_argument", problems, where)


def call(store: ToolStore, name: str, arguments: Any, outputs: Mapping[str, Any] | None = None) -> dict:
    """Run one tool; the result is a JSON-ready dict, an error result when the call cannot be answered."""
    tool = BY_NAME.get(name)
    if tool is None:
        return _error("unknown_tool", f"no tool {name!r}; tools are {', '.join(BY_NAME)}")
    if not isinstance(arguments, Mapping):
        return _error("invalid_argument", f"arguments must be a JSON object, got {type(arguments).__name__}")
    try:
        resolved = refs.resolve(dict(arguments), outputs or {})
    except refs.ReferenceError_ as exc:
        return _error("dangling_reference", str(exc), exc.argument)
    key = _call_key(name, resolved) if store.remembers else None
    if key is not None and (known := store.remembered(key)) is not None:
        return known
    result = _answer(store, tool, resolved)
    if key is not None:
        store.remember(key, result)
    return result


def _call_key(name: str, arguments: dict) -> tuple[str, str] | None:
    """A call as a key: the tool and its resolved arguments in canonical JSON (None when they are not JSON)."""
    try:
        return name, canonical_json(arguments)
    except (TypeError, ValueError):
        return None


def _answer(store: ToolStore, tool: Tool, resolved: dict) -> dict:
    try:
        parsed = tool.input_model.model_validate(resolved, strict=False)
    except ValidationError as exc:
        return _validation_error(exc)
    try:
        return tool.function(store, parsed).model_dump(mode="json")
    except functions.ToolFailure as exc:
        return _error(exc.code, exc.message, exc.argument)


def describe() -> list[dict]:
    return [
        {
            "name": t.name,
            "description": t.description,
            "input_schema": t.input_schema(),
            "output_schema": t.output_schema(),
        }
        for t in TOOLS
    ]
