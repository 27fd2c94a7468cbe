"""Tool errors are results; agent text never reaches SQL; references; ties and windows as properties; concurrency."""

from __future__ import annotations

import multiprocessing
import typing

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contracts.tools import ErrorCode
from pipeline.harness.build import build
from pipeline.store.compute import DAY, window_bounds
from pipeline.tools import registry
from pipeline.tools.access import ToolStore
from pipeline.tools.functions import nearest_index
from pipeline.tools.refs import resolve
from tests.helpers import make_workspace, real_lines, xai_config

# Rows of 2019 at L4: `pe` is empty in every one of them, so L4__pe has no observations.
BODY = "\n".join(real_lines("xai4heat/xai4heat_scada_L4.csv", range(44000, 44400))) + "\n"
W = {"window_start": "2019-11-01T00:00:00Z", "window_end": "2019-11-02T00:00:00Z", "period": "day"}


@pytest.fixture(scope="session")
def store(tmp_path_factory):
    ws = make_workspace(
        tmp_path_factory.mktemp("tools"), "xai4heat", xai_config(held_out_sites="[]"), {"xai4heat_scada_L4.csv": BODY}
    )
    build(ws, until="store")
    opened = ToolStore.for_corpus(ws, "xai4heat")
    yield opened
    opened.close()


ERROR_CALLS: dict[str, tuple[str, dict, dict]] = {
    "invalid_argument": ("rank_window", {"stream_ids": ["L4__t_amb"], "top_k": "three", **W}, {}),
    "malformed_timestamp": ("lookup_observation", {"stream_id": "L4__t_amb", "timestamp": "yesterday"}, {}),
    "naive_timestamp": ("lookup_observation", {"stream_id": "L4__t_amb", "timestamp": "2019-11-01T10:00:00"}, {}),
    "unknown_stream": ("aggregate_window", {"stream_id": "L4__nothing", **W}, {}),
    "unknown_site": ("list_points", {"site": "L99"}, {}),
    "unknown_tool": ("delete_everything", {}, {}),
    "dangling_reference": ("inspect_quality", {"stream_id": "$c9.stream_id"}, {"c1": {"stream_id": "L4__t_amb"}}),
    "invalid_window": (
        "aggregate_window",
        {
            "stream_id": "L4__t_amb",
            "window_start": W["window_end"],
            "window_end": W["window_start"],
            "period": "custom",
        },
        {},
    ),
    "misaligned_window": (
        "aggregate_window",
        {"stream_id": "L4__t_amb", **W, "window_start": "2019-11-01T06:00:00Z"},
        {},
    ),
    "empty_window": (
        "aggregate_window",
        {"stream_id": "L4__t_amb", **W, "window_start": "2023-01-01T00:00:00Z", "window_end": "2023-01-02T00:00:00Z"},
        {},
    ),
    "empty_stream": ("inspect_quality", {"stream_id": "L4__pe"}, {}),
}


def test_every_error_code_is_reachable_and_tested():
    assert set(ERROR_CALLS) == set(typing.get_args(ErrorCode))


@pytest.mark.parametrize("code", sorted(ERROR_CALLS))
def test_error_codes(store, code):
    name, arguments, outputs = ERROR_CALLS[code]
    result = registry.call(store, name, arguments, outputs)
    assert result["error"] is True and result["code"] == code, result
    assert result["message"]


def test_arguments_must_be_an_object(store):
    assert registry.call(store, "list_points", ["L4"])["code"] == "invalid_argument"


INJECTIONS = [
    "'; DROP TABLE observations; --",
    "L4__t_amb' OR '1'='1",
    '" ; DELETE FROM streams; --',
    "$(rm -rf /)",
    "\x00",
    "L4__t_amb%",
]


def _string_arguments(tool) -> list[str]:
    props = tool.input_schema()["properties"]
    return [
        name
        for name, spec in props.items()
        if spec.get("type") == "string" or any(alt.get("type") == "string" for alt in spec.get("anyOf", []))
    ]


@pytest.mark.parametrize("tool", registry.TOOLS, ids=lambda t: t.name)
def test_injection_strings_are_only_ever_values(store, tool):
    base = {
        "site": "L4",
        "point_class": "Outside_Air_Temperature_Sensor",
        "stream_id": "L4__t_amb",
        "timestamp": "2019-11-01T10:00:00Z",
        "left_stream_id": "L4__t_amb",
        "right_stream_id": "L4__t_ref",
        "stream_ids": ["L4__t_amb"],
        **W,
    }
    required = tool.input_schema().get("required", [])
    counts = store._rows("SELECT (SELECT count(*) FROM observations) AS o, (SELECT count(*) FROM streams) AS s")
    for argument in _string_arguments(tool):
        for text in INJECTIONS:
            arguments = {k: v for k, v in base.items() if k in tool.input_schema()["properties"] and (k in required)}
            arguments[argument] = text
            result = registry.call(store, tool.name, arguments)
            assert isinstance(result, dict)
            if "error" in result:
                assert result["code"] in typing.get_args(ErrorCode)
    assert store._rows("SELECT (SELECT count(*) FROM observations) AS o, (SELECT count(*) FROM streams) AS s") == counts


def test_references_to_earlier_outputs(store):
    outputs = {
        "c1": registry.call(store, "list_points", {"site": "L4", "point_class": "Leaving_Hot_Water_Temperature_Sensor"})
    }
    assert outputs["c1"]["stream_ids"] == ["L4__t_sup_prim", "L4__t_sup_sec"]
    ranked = registry.call(store, "rank_window", {"stream_ids": "$c1.stream_ids", **W, "top_k": 2}, outputs)
    assert {r["stream_id"] for r in ranked["ranked_streams"]} <= set(outputs["c1"]["stream_ids"])
    one = registry.call(store, "inspect_quality", {"stream_id": "$c1.stream_ids[1]"}, outputs)
    assert one["stream_id"] == "L4__t_sup_sec"
    deep = registry.call(store, "inspect_quality", {"stream_id": "$c1.points[0].stream_id"}, outputs)
    assert deep["stream_id"] == "L4__t_sup_prim"
    assert (
        registry.call(store, "inspect_quality", {"stream_id": "$c1.stream_ids[5]"}, outputs)["code"]
        == "dangling_reference"
    )
    assert (
        registry.call(store, "inspect_quality", {"stream_id": "$c1.nothing"}, outputs)["code"] == "dangling_reference"
    )


def test_resolve_leaves_ordinary_strings_alone():
    assert resolve({"a": "$ not a ref", "b": ["x", 1]}, {}) == {"a": "$ not a ref", "b": ["x", 1]}


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.integers(min_value=-(10**12), max_value=10**12), min_size=1, max_size=40, unique=True),
    st.integers(min_value=-2 * 10**12, max_value=2 * 10**12),
)
def test_nearest_is_closest_and_ties_go_earlier(times, at):
    ts = np.array(sorted(times), dtype=np.int64)
    found = nearest_index(ts, at)
    best = min(abs(int(t) - at) for t in ts)
    assert abs(int(ts[found]) - at) == best
    assert found == min(i for i, t in enumerate(ts) if abs(int(t) - at) == best)


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=0, max_value=4_102_444_800_000_000), st.sampled_from(["day", "week", "month"]))
def test_window_bounds_hold_the_timestamp_and_are_aligned(ts, period):
    from datetime import UTC, datetime

    start, end = (int(x[0]) for x in window_bounds(np.array([ts], dtype=np.int64), period))
    assert start <= ts < end
    begin = datetime.fromtimestamp(start / 1e6, UTC)
    assert (begin.hour, begin.minute, begin.second, begin.microsecond) == (0, 0, 0, 0)
    if period == "day":
        assert end - start == DAY
    elif period == "week":
        assert begin.weekday() == 0 and end - start == 7 * DAY
    else:
        finish = datetime.fromtimestamp(end / 1e6, UTC)
        assert begin.day == 1 and finish.day == 1 and (finish.month - begin.month) % 12 == 1


def _reader(path: str, rounds: int) -> list[dict]:
    store = ToolStore(__import__("pathlib").Path(path))
    results = []
    for i in range(rounds):
        results.append(
            registry.call(
                store,
                "lookup_observation",
                {"stream_id": "L4__t_amb", "timestamp": f"2019-11-01T{i % 24:02d}:30:00Z", "mode": "nearest"},
            )
        )
        results.append(registry.call(store, "aggregate_window", {"stream_id": "L4__t_ref", **W}))
    store.close()
    return results


@pytest.mark.slow
def test_eight_processes_read_one_store_at_once(store):
    context = multiprocessing.get_context("spawn")
    with context.Pool(8) as pool:
        outcomes = pool.starmap(_reader, [(str(store.path), 30)] * 8)
    assert all(outcome == outcomes[0] for outcome in outcomes)
    assert not any("error" in r for r in outcomes[0])


def test_a_store_that_remembers_results_answers_as_one_that_does_not(store):
    """The build stages' stores keep tool results by call: the same answers, errors included, each a copy of its own
    (a caller that changes what it got changes nothing later); arguments that are not JSON are never remembered."""
    from pipeline.tools.access import ToolStore
    from pipeline.tools.registry import call

    remembering = ToolStore(store.path, remember_results=True)
    try:
        for tool, arguments, outputs in [
            *ERROR_CALLS.values(),
            ("aggregate_window", {"stream_id": "L4__t_amb", **W}, {}),
            ("list_points", {"site": "L4"}, {}),
        ]:
            plain = call(store, tool, arguments, outputs)
            first, again = call(remembering, tool, arguments, outputs), call(remembering, tool, arguments, outputs)
            assert first == again == plain and first is not again
        kept = call(remembering, "list_points", {"site": "L4"})
        kept["stream_ids"].clear()
        assert call(remembering, "list_points", {"site": "L4"}) == call(store, "list_points", {"site": "L4"})
        assert remembering.remembers and not store.remembers
        assert call(remembering, "lookup_observation", {"stream_id": "L4__t_amb", "timestamp": float("nan")})["code"]
        assert not any("NaN" in key for _, key in remembering._results)
    finally:
        remembering.close()


def test_remembered_results_stay_within_their_byte_budget(store, monkeypatch):
    """The least recently used results go first once the kept JSON passes REMEMBERED_BYTES; answers stay the same."""
    from pipeline.tools.access import ToolStore
    from pipeline.tools.registry import call

    monkeypatch.setattr("pipeline.tools.access.REMEMBERED_BYTES", 2_000)
    remembering = ToolStore(store.path, remember_results=True)
    try:
        days = [
            {**W, "window_start": f"2019-11-{d:02d}T00:00:00Z", "window_end": f"2019-11-{d + 1:02d}T00:00:00Z"}
            for d in range(1, 20)
        ]
        for _ in range(2):
            for window in days:
                arguments = {"stream_id": "L4__t_amb", **window}
                assert call(remembering, "aggregate_window", arguments) == call(store, "aggregate_window", arguments)
        assert 0 < remembering._remembered_bytes <= 2_000 and 0 < len(remembering._results) < len(days)
    finally:
        remembering.close()
