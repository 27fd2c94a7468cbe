"""Damaged inspect eval logs through `write_trace` (issue 53): a log of the shipped task played by inspect's mock
model, with a record's value replaced by hostile JSON, a key dropped, its records not a list, a sample's id or
epoch changed, or the task's metadata damaged, ends in a trace every line of which is a valid record, or in one
line (RunError, or inspect's PrerequisiteError), never a traceback. Few examples in make test, many in make fuzz.
Played on the shipped release (no build)."""

from __future__ import annotations

import copy
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contracts.runtime import EpisodeEnd, TraceHeader, TurnRecord
from pipeline.core.errors import TelemetryBenchError
from pipeline.harness.inspect_task import RECORDS, write_trace
from tests.helpers import REPO, fuzz_settings

inspect_ai = pytest.importorskip("inspect_ai")
HOSTILE = st.sampled_from(
    [None, True, -1, 0, 10**30, 1e308, float("nan"), "", "\ud800", "x" * 5000, [], {}, [[[[]]]], {"type": "turn"}]
) | st.text(max_size=20)


@pytest.fixture(scope="session")
def log(tmp_path_factory):
    from inspect_ai import eval as inspect_eval
    from inspect_ai.model import ModelOutput, ModelUsage, get_model

    folder = tmp_path_factory.mktemp("inspect")

    def reply(messages, tools, tool_choice, config):
        output = ModelOutput.from_content("mockllm/model", "I do not know")
        output.usage = ModelUsage(input_tokens=10, output_tokens=4, total_tokens=14)  # else inspect counts (online)
        return output

    model = get_model("mockllm/model", custom_outputs=reply)
    release = REPO / "artifacts" / "xai4heat" / "release"
    (played,) = inspect_eval(
        "telemetry_bench/xai4heat",
        model=model,
        task_args={"release": str(release), "split": "test", "cache_dir": str(folder / "cache")},
        limit=2,
        log_dir=str(folder / "logs"),
        display="none",
    )
    assert played.status == "success", played.error
    return played


@st.composite
def damage(draw):
    return draw(st.sampled_from(["value", "drop", "records", "repeat", "id", "epoch", "metadata"])), draw(st.data())


def _damaged(log, kind, data):
    log = copy.deepcopy(log)
    sample = data.draw(st.sampled_from(log.samples))
    records = sample.store[RECORDS]
    if kind in ("value", "drop") and records:
        record = data.draw(st.sampled_from(records))
        key = data.draw(st.sampled_from(sorted(record)))
        if kind == "value":
            record[key] = data.draw(HOSTILE)
        else:
            del record[key]
    elif kind == "records":
        sample.store[RECORDS] = data.draw(HOSTILE)
    elif kind == "repeat" and records:
        records.append(copy.deepcopy(data.draw(st.sampled_from(records))))
    elif kind == "id":
        sample.id = data.draw(st.text(max_size=30) | st.integers())
    elif kind == "epoch":
        sample.epoch = data.draw(st.integers(-3, 10**6))
    elif kind == "metadata":
        metadata = log.eval.metadata
        key = data.draw(st.sampled_from(sorted(metadata)))
        if data.draw(st.booleans()):
            del metadata[key]
        else:
            metadata[key] = data.draw(HOSTILE)
    return log


@pytest.mark.fuzz
@fuzz_settings(15, 400)
@given(damage())
def test_a_damaged_eval_log_writes_a_valid_trace_or_stops_in_one_line(log, tmp_path_factory, change):
    from inspect_ai._util.error import PrerequisiteError

    damaged = _damaged(log, *change)
    out = tmp_path_factory.mktemp("trace") / "inspect.jsonl"
    try:
        write_trace(damaged, out)
    except (TelemetryBenchError, PrerequisiteError) as exc:
        text = str(exc)
        assert text and "\n" not in text and "Traceback" not in text, text
        assert not out.exists()
        return
    lines = out.read_bytes().split(b"\n")[:-1]  # not splitlines: a record keeps a U+2028 an agent wrote, unescaped
    TraceHeader.model_validate(json.loads(lines[0]))
    for line in lines[1:]:
        record = json.loads(line)
        (TurnRecord if record["type"] == "turn" else EpisodeEnd).model_validate(record)
