"""Corpora built at once (pipeline/harness/at_once.py): in spawned processes, results in the order given, every
outcome reported as it ends, the first failure raised with its own words, a worker's death in one line; on threads
stage by stage, every first stage before any second one, the largest first."""

from __future__ import annotations

import os
import threading
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


# The native stages on threads, stage by stage (steps_on_threads).


def _recording(started: list[str], fails: str = "", gate=None):
    """A step that notes its start (item/step), fails where told, and waits at `gate` before ending when given."""

    def step(item: str, number: int, mine: Resources) -> str:
        started.append(f"{item}/{number}")
        if f"{item}/{number}" == fails:
            raise StageError(f"{item}: step {number} failed on purpose")
        if gate is not None:
            gate.wait(timeout=60)
        return f"{item}/{number}/{mine.workers}"

    return step


SIZES = {"small": 1, "large": 3, "middle": 2}


def _size(item: str, number: int, before: list[str]) -> float:
    """The first step: the item's size; a later one: the reverse order, so the order of the steps shows which
    rule chose it."""
    assert len(before) == number
    return SIZES[item] if number == 0 else -SIZES[item]


def test_steps_come_back_per_item_in_step_order_and_every_one_is_reported():
    heard, started = [], []
    items = ["small", "large", "middle"]
    results = at_once.steps_on_threads(_recording(started), items, 3, Resources(workers=2), heard.append, _size)
    assert results == [[f"{item}/{n}/1" for n in range(3)] for item in items]
    assert sorted(heard) == sorted(sum(results, []))
    assert sorted(started) == sorted(f"{item}/{n}" for item in items for n in range(3))


def test_one_worker_takes_every_first_step_before_any_second_one_the_largest_first():
    started = []
    results = at_once.steps_on_threads(
        _recording(started), ["small", "large", "middle"], 2, Resources(workers=1), None, _size
    )
    # whole items one after the other would run small/0, small/1, large/0, ...
    assert started == ["large/0", "middle/0", "small/0", "small/1", "middle/1", "large/1"]
    assert results[0] == ["small/0/1", "small/1/1"]


def test_two_workers_start_no_second_step_while_a_first_one_waits():
    started = []
    items = ["small", "large", "middle", "fourth"]
    SIZES["fourth"] = 0
    try:
        at_once.steps_on_threads(_recording(started), items, 2, Resources(workers=2), None, _size)
    finally:
        del SIZES["fourth"]
    firsts = [index for index, name in enumerate(started) if name.endswith("/0")]
    assert firsts == [0, 1, 2, 3], started
    assert set(started[:2]) == {"large/0", "middle/0"}  # the two largest start at once


def test_a_failed_step_stops_every_item_before_its_next_step_and_the_first_failure_in_item_order_is_raised():
    heard, started = [], []
    later_failed = threading.Event()

    def fails(item: str, number: int, mine: Resources) -> str:
        started.append(f"{item}/{number}")
        if item == "large":  # the later item in item order fails first
            later_failed.set()
            raise StageError("large: step 0 failed on purpose")
        if item == "middle":
            later_failed.wait(timeout=60)
            time.sleep(0.2)
            raise StageError("middle: step 0 failed on purpose")
        return f"{item}/{number}"

    with pytest.raises(StageError, match="^middle: step 0 failed on purpose$"):
        at_once.steps_on_threads(fails, ["middle", "large", "small"], 2, Resources(workers=2), heard.append, _size)
    assert heard == [] and sorted(started) == ["large/0", "middle/0"]  # small/0 waited, and never started


def test_a_step_running_when_another_fails_ends_and_is_reported_before_the_failure_is_raised():
    heard, ended = [], []

    def step(item: str, number: int, mine: Resources) -> str:
        if item == "large":
            raise StageError("large: step 0 failed on purpose")
        time.sleep(0.5)
        ended.append(f"{item}/{number}")
        return f"{item}/{number}"

    with pytest.raises(StageError, match="^large: step 0 failed on purpose$"):
        at_once.steps_on_threads(step, ["middle", "large", "small"], 2, Resources(workers=2), heard.append, _size)
    assert ended == heard == ["middle/0"]


def test_a_report_that_fails_is_its_items_failure_and_the_first_in_item_order_is_raised():
    heard = []
    reported = threading.Event()

    def step(item: str, number: int, mine: Resources) -> str:
        if item == "middle":  # the earlier item fails once the later one's report has failed
            reported.wait(timeout=60)
            raise StageError("middle: step 0 failed on purpose")
        return f"{item}/{number}"

    def report(outcome: str) -> None:
        heard.append(outcome)
        reported.set()
        raise BrokenPipeError("the reader of the reports went away")

    with pytest.raises(StageError, match="^middle: step 0 failed on purpose$"):
        at_once.steps_on_threads(step, ["middle", "large", "small"], 2, Resources(workers=2), report, _size)
    assert heard == ["large/0"]  # and no step started after it
