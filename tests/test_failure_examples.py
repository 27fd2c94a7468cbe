"""The report's failure examples: each failure of a trace's runs with its first run, in the benchmark's words."""

from __future__ import annotations

from contracts.runtime import TurnRecord
from pipeline.harness.traces import Played, load_episodes
from pipeline.release.playable import Release
from pipeline.report.failures import CLIP, failure_examples
from pipeline.runtime.scoring import score_episode
from tests.helpers import REPO


def test_each_failure_gets_its_first_run_in_the_traces_words(tmp_path):
    release = Release(REPO / "artifacts" / "pvdaq" / "release", tmp_path, lambda note: None)
    keywords = release.keywords()
    first, second = load_episodes(release.episodes_path("test"))[:2]
    echo = "What was the mean? " * 40  # a model echoing the question, longer than an example quotes
    cut = TurnRecord(
        episode_id=second.id,
        run=0,
        turn=0,
        action=None,
        raw={"unparsed": echo, "error": "the reply was cut at the cap of 256 tokens (finish_reason length)"},
        issues=["parse_error"],
        usage={"prompt_tokens": 900, "completion_tokens": 256},
    )
    answer = TurnRecord(
        episode_id=first.id,
        run=0,
        turn=0,
        action={"kind": "answer", "text": "no idea", "fields": {}},
        issues=[],
    )
    played = [
        Played(second, 0, None, [cut], score_episode(second, [cut], keywords)),
        Played(first, 0, None, [answer], score_episode(first, [answer], keywords)),
    ]
    examples = {x.mode: x for x in failure_examples(played, {(first.id, 0): ("premature_termination",)})}
    parse = examples["parse_error"]
    assert parse.episode_id == second.id and parse.runs == 1
    assert parse.words.startswith("turn 0: the reply was cut at the cap of 256 tokens (finish_reason length)")
    assert "(256 tokens out); the model said: What was the mean?" in parse.words and len(parse.words) == CLIP
    stuck = examples["not_terminated"]
    assert stuck.runs == 2 and stuck.episode_id == min(first.id, second.id)
    assert "never gave the final answer" in stuck.words
    rejected = examples["format_error"]
    assert rejected.episode_id == first.id and "no fields given" in rejected.words
    assert "the tools it called: none" in examples["premature_termination"].words
    ordered = failure_examples(played, {})
    assert [x.runs for x in ordered] == sorted((x.runs for x in ordered), reverse=True)
