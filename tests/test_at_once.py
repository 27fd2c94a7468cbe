"""Corpora built at once in spawned processes (pipeline/harness/at_once.py): results in the order given, every
outcome reported as it ends, the first failure raised with its own words, a worker's death in one line."""

from __future__ import annotations

import os
import time

import pytest

from pipeline.core.errors import StageError
from pipeline.core.resources import Resources
from pipeline.harness import at_once


def steps(item: str, mine: Resources, report, stop) -> list[str]:
    """A corpus of three stages: each reported as it ends, none started once the build is stopped."""
    done = []
    for stage in ("tasks", "episodes", "audit"):
        if stop is not None and stop.is_set():
            break
        if item == f"fails-at-{stage}":
            raise StageError(f"{item}: the {stage} failed on purpose")
        if item == "dies":
            os._exit(9)
        time.sleep(0.2 if item == "slow" else 0)
        done.append(f"{item}/{stage}/{mine.workers}")
        report(done[-1])
        if item == "waits":  # until another corpus fails (a minute at most)
            stop.wait(60)
    return done


def test_results_come_back_in_the_order_given_and_every_outcome_is_reported():
    heard = []
    results = at_once.in_processes(steps, ["slow", "b", "c"], ["slow", "b", "c"], Resources(workers=2), heard.append)
    assert results == [[f"{item}/{stage}/1" for stage in ("tasks", "episodes", "audit")] for item in ("slow", "b", "c")]
    assert sorted(heard) == sorted(sum(results, []))


def test_the_first_failure_is_raised_in_its_own_words_and_stops_the_others():
    heard = []
    names = ["fails-at-episodes", "waits"]
    with pytest.raises(StageError, match="^fails-at-episodes: the episodes failed on purpose$"):
        at_once.in_processes(steps, names, names, Resources(workers=2), heard.append)
    assert "fails-at-episodes/tasks/1" in heard
    # it had not started, or it stopped before its next stage (without the stop it goes on after a minute)
    assert "waits/episodes/1" not in heard


def test_a_worker_that_dies_is_one_line_naming_what_it_built():
    with pytest.raises(StageError, match=r"^dies: the process building it ended without a word .*--workers 1"):
        at_once.in_processes(steps, ["dies"], ["dies"], Resources(workers=2), None)
