"""A record a trace holds twice (issue 53): `score` refuses it in one line naming the file and the line, never
counting the episode's turns twice; inspect's `write_trace` refuses an eval log holding a sample twice, and a
malformed log (records not a list, a record not an object, one without a type) is one line, not a KeyError."""

from __future__ import annotations

import json
from collections import defaultdict
from types import SimpleNamespace

import pytest

from pipeline.core.errors import RunError
from tests.test_trace_readers import (  # noqa: F401 (played: a fixture)
    LIMIT,
    cli,
    on_release,
    one_error_line,
    played,
    rows_of,
    written,
)

pytest.importorskip("inspect_ai")

from pipeline.harness.inspect_task import RECORDS, write_trace  # noqa: E402 (needs inspect_ai)


def _score(base, trace):
    return cli(base, "score", trace, "--release", base / "artifacts" / "xai4heat" / "release", "--json")


def test_a_trace_with_every_record_twice_is_refused(played, tmp_path):  # noqa: F811 (the imported fixture)
    base, trace = played
    header, *records = rows_of(trace)
    twice = written(tmp_path / "twice.jsonl", [header, *(r for record in records for r in (record, record))])
    one_error_line(_score(base, twice), f"{twice}: line 3: ", "repeats line 2; a record is scored once")
    appended = written(tmp_path / "appended.jsonl", [header, *records, *records])
    one_error_line(_score(base, appended), f"{appended}: line {len(records) + 2}: ", "repeats line 2")


def test_resuming_a_trace_holding_a_record_twice_is_refused_before_anything_is_written(played, tmp_path):  # noqa: F811
    """--resume reads a record held twice as score does: one line naming it, the trace left byte for byte as it was
    (make fuzz found a resume that rewrote the trace, then refused it)."""
    base, trace = played
    header, *records = rows_of(trace)
    twice = tmp_path / "twice.jsonl"
    twice.write_text("".join(json.dumps(r) + "\n" for r in [header, *records, records[-1]]), encoding="utf-8")
    before = twice.read_bytes()
    resumed = cli(base, "run", *on_release(base), "--split", "test", "--agent", "oracle", "--limit", LIMIT, "--resume",
                  "--out", twice)  # fmt: skip
    one_error_line(resumed, f"{twice}: line {len(records) + 2}: ", f"repeats line {len(records) + 1}")
    assert twice.read_bytes() == before


def _log(trace, repeat_first: bool = False, change=None):
    """An inspect eval log, as far as write_trace reads one, holding the trace's episodes as samples."""
    header, *records = rows_of(trace)
    by_episode = defaultdict(list)
    for record in records:
        by_episode[record["episode_id"]].append(record)
    samples = [
        SimpleNamespace(id=episode, epoch=1, store={RECORDS: rows}, error=None) for episode, rows in by_episode.items()
    ]
    if repeat_first:
        samples.append(samples[0])
    if change:
        change(samples[0].store)
    config = SimpleNamespace(model_dump=lambda **_: {})
    task = {k: header[k] for k in ("corpus", "split", "episode_set", "episode_set_hash")}
    return SimpleNamespace(
        location="log.eval",
        status="success",
        error=None,
        samples=samples,
        eval=SimpleNamespace(
            metadata=task,
            model="mockllm/model",
            model_generate_config=config,
            config=SimpleNamespace(limit=None, epochs=1),
        ),
    )


def test_write_trace_refuses_a_sample_held_twice(played, tmp_path):  # noqa: F811 (the imported fixture)
    base, trace = played
    whole = write_trace(_log(trace), tmp_path / "whole.jsonl")
    assert _score(base, whole).exit_code == 0  # the log as written is scored: the refusal below is the repeat's
    with pytest.raises(RunError) as refused:
        write_trace(_log(trace, repeat_first=True), tmp_path / "repeated.jsonl")
    assert "repeats log.eval: sample" in str(refused.value) and "a record is scored once" in str(refused.value)
    assert not (tmp_path / "repeated.jsonl").exists()


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (lambda store: store.update({RECORDS: {"a": 1}}), "is a dict, not a list of records"),
        (lambda store: store[RECORDS].insert(0, 7), "record 0: not a trace record (a int, not turn or end)"),
        (lambda store: store[RECORDS][0].pop("type"), "record 0: not a trace record (type: None, not turn or end)"),
        (lambda store: store[RECORDS][0].update(run=-1), "record 0: run"),
    ],
    ids=["not-a-list", "an-int", "no-type", "bad-field"],
)
def test_write_trace_on_a_malformed_log_is_one_line(played, tmp_path, change, says):  # noqa: F811 (the imported fixture)
    _, trace = played
    with pytest.raises(RunError) as refused:
        write_trace(_log(trace, change=change), tmp_path / "bad.jsonl")
    assert says in str(refused.value) and "\n" not in str(refused.value)
