"""Lift one static task into an episode: withheld slot, phase golds through the tools, revision, commitment."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import numpy as np

from contracts.answers import AnswerForm, AnswersConfig
from contracts.episodes import (
    AggregatePhase,
    CommitmentPhase,
    ComparePhase,
    Episode,
    EpisodesConfig,
    FamilyLift,
    FollowUp,
    LookupPhase,
    NearestTimestampPhase,
    PreferencePhase,
    QualityDecisionPhase,
    RankPhase,
    TimestampValuePhase,
    WithheldSlot,
)
from contracts.tasks import WINDOW_SLOT, FamiliesConfig, Family, Task
from pipeline.core.canonical import digest
from pipeline.core.errors import LiftError
from pipeline.episodes.calls import REVISION_PREFIX, as_calls, gold_of, revised, run
from pipeline.episodes.rules import (
    BAND_OUTCOME,
    NEAREST_FIELDS,
    preferred_window,
    quality_decision_answer,
    timestamp_commitment,
)
from pipeline.store import expected
from pipeline.store.compute import DAY, MONDAY, window_bounds
from pipeline.tasks import forms, gold, render
from pipeline.tasks.probes import grid_solvable
from pipeline.tools.access import ToolStore
from pipeline.tools.timeutil import format_us, parse_us

PHASES = {
    "lookup": LookupPhase,
    "aggregate": AggregatePhase,
    "compare": ComparePhase,
    "rank": RankPhase,
    "timestamp_value": TimestampValuePhase,
    "nearest_timestamp": NearestTimestampPhase,
    "quality_decision": QualityDecisionPhase,
}

WEEK = 7 * DAY


def week_index(us: int | np.ndarray) -> int | np.ndarray:
    """The calendar week (Monday to Sunday, UTC) of an instant in epoch microseconds, as a count of weeks."""
    return period_index(us, WEEK)


def period_index(us: int | np.ndarray, period: int) -> int | np.ndarray:
    """The calendar period (a UTC day or a Monday-to-Sunday week, `period` microseconds long) of an instant."""
    return (us - MONDAY) // period


def _jittered(slot: int, jitter: int, low: int, high: int) -> int:
    """A probe `jitter` off its slot, the other way when that would leave the block [low, high): a slot at a block's
    first instant probed a minute early would ask about the buffer before it (the time plans' leak check,
    tests/test_short_time_plan.py). The jitter's size stays as drawn, so the probe's minute still tells nothing."""
    return slot + jitter if low <= slot + jitter < high else slot - jitter


def commitment_instant(calls: list[dict]) -> int | None:
    """The instant a commitment asks about (its reading's time or its week's start), from its canonical calls."""
    for call in calls:
        for key in ("timestamp", "window_start"):
            if key in call["arguments"]:
                return parse_us(call["arguments"][key])
    return None


def commitment_kind(calls: list[dict]) -> str:
    """What a commitment asks about, from its canonical calls: a reading ("instant") or a whole week ("week"). Visible
    without a lookup (a commitment names its instant or its week), so the episodes stage keeps it from telling the
    outcome, and the clock guesser backs off to it."""
    return "instant" if any(c["tool"] == "lookup_observation" for c in calls) else "week"


def reply_template(cfg: EpisodesConfig, lift: FamilyLift) -> str | None:
    """The template of the user's reply naming the slot the family withholds (None when it withholds nothing): what
    the simulator says when asked, and what a complete opening ends with."""
    if lift.withhold == "site":
        return cfg.slots["site"].reply
    return lift.time_reply if lift.withhold == "time" else None


def variant(episode: Episode, cfg: EpisodesConfig) -> str:
    """Which variant an episode is: `withheld` (the user leaves the family's slot out), `complete` (the user says it up
    front) or `none` (its family withholds nothing)."""
    if cfg.families[episode.family].withhold == "none":
        return "none"
    return "withheld" if episode.withheld else "complete"


class Chooser:
    """Deterministic choices of one episode: each a hash of the episode id and a purpose."""

    def __init__(self, seed: str, episode_id: str) -> None:
        self.base = f"{seed}|{episode_id}"

    def fraction(self, purpose: str) -> float:
        return int(digest(f"{self.base}|{purpose}")[:12], 16) / float(16**12)

    def index(self, purpose: str, n: int) -> int:
        return int(digest(f"{self.base}|{purpose}")[:12], 16) % n


def _shift(slots: dict, period: str, direction: int) -> dict | None:
    """The previous (-1) or next (+1) window of the same kind, as new slots."""
    start = parse_us(slots["window_start_iso"])
    end = parse_us(slots["anchor_iso"] if "anchor_iso" in slots else slots["window_end_iso"])
    if period == "relative":
        return {**render.window_slots(start - DAY, end - DAY), "anchor": end - DAY, "anchor_iso": format_us(end - DAY)}
    if period in ("day", "week"):
        length = end - start
        return render.window_slots(start + direction * length, end + direction * length)
    at = np.array([start - 1 if direction < 0 else end], dtype=np.int64)
    new_start, new_end = (int(x[0]) for x in window_bounds(at, "month"))
    return render.window_slots(new_start, new_end)


def _inside(task: Task, start: int, end: int | None) -> bool:
    low, high = task.time_block
    return low <= start and (end if end is not None else start) <= high


def _holds_a_week(task: Task) -> bool:
    """Whether the task's time block holds a whole calendar week (Monday to Sunday) to commit on: every block of a
    whole-week plan does; a block of a short time plan (days) may not, and its rows commit on a reading instead."""
    low, high = task.time_block
    return low + (-(low - MONDAY)) % WEEK + WEEK <= high


def _distance(start: int, end: int, spans: list[tuple[int, int]]) -> int:
    """How far [start, end) lies from the nearest discussed span (0 when they overlap)."""
    return min(max(0, lo - end, start - hi) for lo, hi in spans)


JITTERS = (0, 60_000_000, -60_000_000, 120_000_000, -120_000_000)  # commitment probes: 0, 1 or 2 minutes off a slot


def _span(slots: dict) -> tuple[int, int]:
    start = parse_us(slots["window_start_iso"])
    end = slots.get("window_end_iso") or slots.get("anchor_iso")
    return start, parse_us(end) if end else start


def _first_resolve(calls: list[dict]) -> str:
    return next(c["id"] for c in calls if c["tool"] == "resolve_point")


class Lifter:
    """Lifts the tasks of one corpus; holds the store and the configuration."""

    def __init__(
        self, store: ToolStore, cfg: EpisodesConfig, families: FamiliesConfig, answers: AnswersConfig, zone: str = "UTC"
    ) -> None:
        self.store, self.cfg, self.families, self.seed, self.answers = (
            store,
            cfg,
            families.families,
            families.seed,
            answers,
        )
        self.zone = zone
        self.grid_minutes = families.grid_minutes
        nearest = [
            f.share_caps.get("grid_solvable") for f in families.families.values() if f.share_caps.get("grid_solvable")
        ]
        self.grid_share = min(nearest) if nearest else 0.0  # revision probes keep the nearest family's grid share
        # (split, period index, outcome) triples the episodes stage has filled: counted per split, since splits by
        # site share calendar weeks, and a cap counted over all of them lets one split's full weeks tell another's
        # outcome (issue 51: the week-complement guesser)
        self.full_periods: set[tuple[str, int, str]] = set()
        self.period = WEEK  # the calendar period commitments are capped per (a day in a corpus of few weeks)
        self.stream_splits: dict[str, str] | None = None  # in a group plan, each stream's split
        self.full_stream_weeks: set[tuple[str, int]] = set()  # (stream, week start) at commit_stream_week_cap

    # ------------------------------------------------------------------ phases
    def _say(self, templates: list[str], purpose: str, slots: dict, choose: Chooser) -> str:
        """A text: a template drawn by hash, dates and instants in the episode's style (drawn by hash, never from the
        gold; local time in the corpus's zone for some episodes)."""
        shown = render.display(
            slots,
            choose.index("date_style", len(render.DATE_STYLES)),
            choose.index("instant_style", len(render.INSTANT_STYLES)),
            self.zone,
        )
        return render.query(templates, choose.index(purpose, len(templates)), shown)

    def _form(
        self, names: list[str], units: dict[str, str | None] | None = None, family: Family | None = None
    ) -> AnswerForm:
        return forms.form(
            names,
            self.answers,
            units,
            family.tolerances if family else None,
            {"acceptable_offset_seconds": f"{self.cfg.acceptable_offset_seconds:g}"},
        )

    def _stream_units(self, names: list[str], stream_id: str) -> dict[str, str | None]:
        return dict.fromkeys(names, self.store.streams[stream_id]["unit"])

    def _first_phase(self, task: Task, lift: FamilyLift, family: Family, prompt: str, outputs: dict) -> Any:
        calls = [c.model_dump() for c in task.canonical_calls]
        outputs.update(run(self.store, calls, outputs))
        answer, form = task.gold, task.verifier
        if lift.phase == "quality_decision":
            answer = quality_decision_answer(outputs[calls[-1]["id"]])
            form = self._form(list(answer))
        return PHASES[lift.phase](
            obligation="decide_quality" if lift.phase == "quality_decision" else "answer",
            prompt=prompt,
            gold=answer,
            form=form,
            canonical_calls=task.canonical_calls,
            acceptable_calls=task.alternative_calls if lift.phase != "quality_decision" else [],
            evidence_stream_ids=task.evidence_stream_ids,
        )

    def _revise_window(self, task, lift, family, slots, outputs, choose: Chooser):
        period = self.families[task.family].period
        keep = {c.id for c in task.canonical_calls if c.tool == "resolve_point"}
        order = [-1, 1] if period == "relative" or choose.fraction("direction") < 0.5 else [1, -1]
        for direction in order[:1] if period == "relative" else order:
            new = {**slots, **_shift(slots, period, direction), "direction": "previous" if direction < 0 else "next"}
            if not _inside(task, new["window_start"], new.get("window_end") or new.get("anchor")):
                continue  # the conversation stays in its split's time block
            calls, names = revised(family.canonical, new, REVISION_PREFIX, keep)
            golds = gold_of(family.canonical, names)
            try:
                merged = run(self.store, calls, outputs)
                answer = gold.extract(golds, merged)
            except (gold.GoldError, render.RenderError):
                continue
            outputs.update(merged)
            alternatives = []
            for alt in family.alternatives:
                alt_calls, _ = revised(alt, new, REVISION_PREFIX, keep)
                alternatives.append(as_calls(alt_calls))
            prompt = self._say(lift.revision_prompts, "revision_prompt", new, choose)
            form = self._form(family.answer_fields, forms.field_units(self.store, golds, merged), family)
            return PHASES[lift.phase](
                obligation="revise_window",
                prompt=prompt,
                gold=answer,
                form=form,
                canonical_calls=as_calls(calls),
                acceptable_calls=alternatives,
                evidence_stream_ids=task.evidence_stream_ids,
            ), new
        return None, slots

    def _revise_target(self, task, lift, family, slots, outputs, choose: Chooser):
        current = task.evidence_stream_ids[0]
        row = self.store.streams[current]
        others = sorted(
            s
            for s, r in self.store.streams.items()
            if s != current
            and r["site_id"] == row["site_id"]
            and r["point_class"] == row["point_class"]
            and r["tool_ready"]
            and r["ambiguity_count"] == 1
            and r["equipment"]
            and not r["content_twins"]
            and (self.stream_splits is None or self.stream_splits.get(s) == task.split)  # stays in its split's groups
        )
        if not others:
            return None, slots
        other = self.store.streams[others[choose.index("other_stream", len(others))]]
        new = {
            **slots,
            "equipment": other["equipment"],
            "equipment_words": render.role_words(other["equipment_role"]),
            "phrase": render.point_phrase(other["label"]),
        }
        new["local_phrase"] = render.local_phrase(new["phrase"], slots["site_label"])
        calls, names = revised(family.canonical, new, REVISION_PREFIX, set())
        golds = gold_of(family.canonical, names)
        merged = run(self.store, calls, outputs)
        answer = gold.extract(golds, merged)
        outputs.update(merged)
        prompt = self._say(lift.revision_prompts, "revision_prompt", new, choose)
        form = self._form(family.answer_fields, forms.field_units(self.store, golds, merged), family)
        return LookupPhase(
            obligation="revise_target",
            prompt=prompt,
            gold=answer,
            form=form,
            canonical_calls=as_calls(calls),
            evidence_stream_ids=[other["stream_id"]],
        ), new

    def _probe_nearest(self, task, lift, slots, outputs, choose: Chooser):
        """A probe between two readings near the one just read (inside the time block), at a fraction of their gap
        drawn by hash, whole seconds. Most probes sit where no grid rule finds the nearest reading: inside a gap of 3 or
        more local steps anywhere in the block, a step away from both readings; a drawn minority (the nearest family's
        grid share) may sit between any two readings within a day of the one just read."""
        base = parse_us(task.gold["observed_timestamp"])
        stream = task.evidence_stream_ids[0]
        ts = self.store.arrays(stream).ts
        step = int(self.store.quality[stream]["step_us"] or 0)
        anywhere = choose.fraction("grid_rule_probe") < self.grid_share
        low, high = (
            (max(task.time_block[0], base - DAY), min(task.time_block[1], base + DAY)) if anywhere else task.time_block
        )
        first, last = int(np.searchsorted(ts, low)), int(np.searchsorted(ts, high))
        gaps = np.diff(ts[first:last])
        # out of the grid rules' reach: inside a gap of 3 or more local steps, a step away from both readings
        wanted = (gaps >= 120_000_000) if anywhere else (gaps >= 3 * step) if step else np.zeros(len(gaps), bool)
        pairs = (np.flatnonzero(wanted) + first).tolist()
        if not pairs:
            return None, slots
        start = choose.index("probe_pair", len(pairs))
        for k in range(len(pairs)):
            i = pairs[(start + k) % len(pairs)]
            left, right = int(ts[i]), int(ts[i + 1])
            margin = 0 if anywhere else step
            at = 0.05 + 0.9 * choose.fraction(f"probe_at{k}")
            probe = left + margin + round(at * (right - left - 2 * margin) / 1e6) * 1_000_000
            nearest = left if probe - left <= right - probe else right
            if left < probe < right and (anywhere or not grid_solvable(probe, nearest, self.grid_minutes)):
                break
        else:
            return None, slots
        resolve = _first_resolve([c.model_dump() for c in task.canonical_calls])
        calls = [
            {
                "id": f"{REVISION_PREFIX}c1",
                "tool": "lookup_observation",
                "arguments": {"stream_id": f"${resolve}.stream_id", "timestamp": format_us(probe), "mode": "nearest"},
            }
        ]
        merged = run(self.store, calls, outputs)
        outputs.update(merged)
        result = merged[f"{REVISION_PREFIX}c1"]
        answer = {k: result[k] for k in NEAREST_FIELDS}
        new = {**slots, "probe_iso": format_us(probe)}
        prompt = self._say(lift.revision_prompts, "revision_prompt", new, choose)
        form = self._form(list(NEAREST_FIELDS), self._stream_units(list(NEAREST_FIELDS), result["stream_id"]))
        return NearestTimestampPhase(
            obligation="probe_nearest",
            prompt=prompt,
            gold=answer,
            form=form,
            canonical_calls=as_calls(calls),
            evidence_stream_ids=task.evidence_stream_ids,
        ), new

    def _prefer(self, lift, family: Family, first: Any, second: Any, outputs, windows: list[dict]):
        """Which of the two compared windows (of the family's period) has data to trust more (rules.preferred_window);
        None when they tie."""
        resolves = [c.id for c in first.canonical_calls if c.tool == "resolve_point"]  # left, right (a pair family)
        calls = []
        for w_index, window in enumerate(windows, start=1):
            for s_index, resolve in enumerate(resolves, start=1):
                calls.append(
                    {
                        "id": f"p3_q{w_index}{s_index}",
                        "tool": "inspect_quality_window",
                        "arguments": {
                            "stream_id": f"${resolve}.stream_id",
                            "window_start": window["window_start_iso"],
                            "window_end": window["window_end_iso"],
                            "period": family.period,
                        },
                    }
                )
        merged = run(self.store, calls, outputs)
        preferred = preferred_window(*([merged[f"p3_q{w}{s}"] for s in range(1, len(resolves) + 1)] for w in (1, 2)))
        if preferred is None:  # the windows' data are alike: nothing to prefer, so nothing is asked
            return None
        outputs.update(merged)
        return PreferencePhase(
            obligation="prefer",
            prompt=lift.prefer_prompt,
            gold={"preferred": preferred},
            form=self._form(["preferred"]),
            canonical_calls=as_calls(calls),
            evidence_stream_ids=first.evidence_stream_ids,
        )

    # ------------------------------------------------------------------ commitment
    def _target(self, choose: Chooser) -> list[str]:
        """Commitment outcomes in the order to try: the drawn one first (declared shares), then the others. The
        episodes stage keeps each family's mix to the shares (outcome quotas over the oversupplied tasks)."""
        x, total = choose.fraction("outcome"), 0.0
        outcomes = list(self.cfg.outcome_shares)
        drawn = outcomes[-1]
        for outcome in outcomes:
            total += self.cfg.outcome_shares[outcome]
            if x < total:
                drawn = outcome
                break
        return [drawn] + [o for o in outcomes if o != drawn]

    def _commit_window(
        self, task: Task, stream_id: str, resolve: str, spans: list[tuple[int, int]], choose: Chooser, outputs
    ):
        """A week of the discussed stream that contains, or starts within reach of, a window discussed (any week of
        the time block when none was), inside the split's time block; its outcome drawn with the declared shares."""
        low, high = task.time_block
        windows = [
            w
            for w in self.store._rows(
                "SELECT window_start, window_end, quality_band FROM aggregates WHERE stream_id = ? AND period = 'week' "
                "AND window_start >= ? AND window_end <= ? ORDER BY window_start",
                [stream_id, low, high],
            )
            if (not spans or _distance(w["window_start"], w["window_end"], spans) <= self.cfg.commit_within_days * DAY)
            and (stream_id, w["window_start"]) not in self.full_stream_weeks
        ]
        for outcome in self._target(choose):
            fitting = [
                w
                for w in windows
                if BAND_OUTCOME[w["quality_band"]][0] == outcome
                and (task.split, int(period_index(w["window_start"], self.period)), outcome) not in self.full_periods
            ]
            if fitting:
                window = fitting[choose.index("commit_window", len(fitting))]
                break
        else:
            raise LiftError(f"{stream_id}: no weekly window near the conversation")
        calls = [
            {
                "id": "pc_c1",
                "tool": "inspect_quality_window",
                "arguments": {
                    "stream_id": f"${resolve}.stream_id",
                    "window_start": format_us(window["window_start"]),
                    "window_end": format_us(window["window_end"]),
                    "period": "week",
                },
            }
        ]
        merged = run(self.store, calls, outputs)
        outputs.update(merged)
        decision, reason = BAND_OUTCOME[merged["pc_c1"]["quality_band"]]
        phrase = render.point_phrase(self.store.streams[stream_id]["label"])
        week = datetime.fromtimestamp(window["window_start"] / 1e6, UTC).strftime("%Y-%m-%d")
        prompt = self._say(
            self.cfg.commit_window_prompts,
            "commit_prompt",
            {"phrase": phrase, "week_start": week, "options": self.cfg.commit_options},
            choose,
        )
        return calls, {"decision": decision, "reason": reason}, prompt

    def timestamp_commitment(self, offset_seconds: float, step_seconds: float | None) -> tuple[str, str]:
        return timestamp_commitment(
            offset_seconds,
            step_seconds,
            self.cfg.acceptable_offset_seconds,
            self.store.thresholds["gap_ratio_abstain_window"],
        )

    def _probe_for(self, stream_id: str, outcome: str, choose: Chooser, low: int, high: int, split: str) -> int | None:
        """A probe instant in [low, high) whose nearest reading gives the outcome, or None when there is none.

        Every probe is a slot of the stream's own cadence (a reading's time, or where a missing reading would have
        been: the reading before a gap plus whole local steps), moved by a jitter of 0, 1 or 2 minutes drawn
        independently of the outcome. So the probe's minute says nothing about the outcome: a reading there (or within
        the acceptable offset) means answer, a missing reading re_clarify, a long run of them abstain."""
        ts = self.store.arrays(stream_id).ts
        first, last = int(np.searchsorted(ts, low)), int(np.searchsorted(ts, high))
        ts = ts[max(0, first - 1) : last + 1]
        step = int(self.store.quality[stream_id]["step_us"] or 0)
        if len(ts) < 3 or step <= 0:
            return None
        jitter = JITTERS[choose.index("probe_jitter", len(JITTERS))]
        limit = step * self.store.thresholds["gap_ratio_abstain_window"]
        acceptable = self.cfg.acceptable_offset_seconds * 1_000_000
        if outcome == "answer":
            inside = ts[(ts >= low) & (ts < high)]
            inside = inside[self._free(inside, outcome, split)]
            if len(inside) == 0:
                return None
            return _jittered(int(inside[choose.index("commit_obs", len(inside))]), jitter, low, high)
        gaps = np.diff(ts)
        # missing slots: the reading before a gap plus whole steps, whose nearest reading is too far (re_clarify) or
        # more than the abstain gap ratio away (abstain)
        lo_d, hi_d = (
            (acceptable + 180_000_000, limit) if outcome == "re_clarify" else (limit + 180_000_000, float("inf"))
        )
        slots = []
        for j in np.flatnonzero((gaps >= 2 * step) & (ts[:-1] >= low) & (ts[1:] < high)):
            k = np.arange(1, int(gaps[j] // step), dtype=np.int64) * step  # offsets of the missing slots
            distance = np.minimum(k, int(gaps[j]) - k)
            found = int(ts[j]) + k[(distance >= lo_d) & (distance <= hi_d)]
            slots += found[self._free(found, outcome, split) & self._expected(stream_id, found)].tolist()
        if not slots:
            return None
        return _jittered(slots[choose.index("commit_slot", len(slots))], jitter, low, high)

    def _expected(self, stream_id: str, instants: np.ndarray) -> np.ndarray:
        """Which instants lie in the stream's expected hours: outside them a missing reading is absent by design, not
        a gap to abstain over (every instant, for a stream without declared silence)."""
        rule = self.store.expected_hours.get(stream_id)
        if rule is None or not len(instants):
            return np.ones(len(instants), dtype=bool)
        return expected.Expected.over(rule, int(instants.min()), int(instants.max())).inside(instants)

    def _free(self, instants: np.ndarray, outcome: str, split: str) -> np.ndarray:
        """Which instants lie in a period that still has room in the split for a commitment with this outcome."""
        full = [w for s, w, o in self.full_periods if s == split and o == outcome]
        return ~np.isin(period_index(instants, self.period), full) if full else np.ones(len(instants), dtype=bool)

    def _commit_timestamp(self, task: Task, stream_id: str, resolve: str, near: int, choose: Chooser, outputs):
        """A reading of the discussed stream to report, within reach of the instant discussed, in the time block."""
        reach = self.cfg.commit_within_days * DAY
        low, high = max(task.time_block[0], near - reach), min(task.time_block[1], near + reach)
        for outcome in self._target(choose):
            probe = self._probe_for(stream_id, outcome, choose, low, high, task.split)
            if probe is not None:
                break
        else:
            raise LiftError(f"{stream_id}: no reading near the conversation")
        calls = [
            {
                "id": "pc_c1",
                "tool": "lookup_observation",
                "arguments": {"stream_id": f"${resolve}.stream_id", "timestamp": format_us(probe), "mode": "nearest"},
            },
            {"id": "pc_c2", "tool": "inspect_quality", "arguments": {"stream_id": f"${resolve}.stream_id"}},
        ]
        merged = run(self.store, calls, outputs)
        outputs.update(merged)
        decision, reason = self.timestamp_commitment(merged["pc_c1"]["offset_seconds"], merged["pc_c2"]["step_seconds"])
        phrase = render.point_phrase(self.store.streams[stream_id]["label"])
        prompt = self._say(
            self.cfg.commit_timestamp_prompts,
            "commit_prompt",
            {"phrase": phrase, "probe_iso": format_us(probe), "options": self.cfg.commit_options},
            choose,
        )
        return calls, {"decision": decision, "reason": reason}, prompt

    # ------------------------------------------------------------------ assembly
    def _slots(self, task: Task) -> dict:
        slots = dict(task.slots)
        if "window_start_iso" in slots:
            end = slots.get("window_end_iso") or slots.get("anchor_iso")
            slots.update(render.window_slots(parse_us(slots["window_start_iso"]), parse_us(end) if end else None))
        site = task.site_ids[0]
        slots["site_label"] = self.store.sites[site]["label"]
        if "phrase" in slots:
            slots["local_phrase"] = render.local_phrase(slots["phrase"], slots["site_label"])
        return slots

    def _withheld(self, task: Task, lift: FamilyLift, slots: dict, choose: Chooser) -> list[WithheldSlot]:
        """The slot the family withholds, with the simulator's reply naming it (none for a family that withholds
        nothing)."""
        template = reply_template(self.cfg, lift)
        if lift.withhold == "site":
            reply = render.query([template], 0, slots)
            return [WithheldSlot(slot="site", value=slots["site_label"], reply=reply)]
        if lift.withhold == "time":
            reply = self._say([template], "time_reply", slots, choose)
            period = self.families[task.family].period
            value = slots["timestamp_iso"] if "timestamp_iso" in slots else slots[WINDOW_SLOT[period]]
            return [WithheldSlot(slot="time", value=value, reply=reply)]
        return []

    def _leaks(self, text: str, withheld: list[WithheldSlot], task: Task) -> bool:
        lowered = text.lower()
        values = [w.value for w in withheld]
        if withheld and withheld[0].slot == "site":
            values += task.site_ids
        elif withheld:
            timed = {
                k: v for k, v in task.slots.items() if k.endswith("_iso") or k in ("day", "week_start", "month_name")
            }
            values += list(timed.values())  # and as every style would say them
            values += [
                v
                for d in range(len(render.DATE_STYLES))
                for i in range(len(render.INSTANT_STYLES))
                for v in render.display(timed, d, i, self.zone).values()
            ]
        return any(str(v).lower() in lowered for v in values if v)

    def _revisions(
        self, task: Task, lift: FamilyLift, family: Family, first: Any, slots: dict, outputs: dict, choose: Chooser
    ) -> tuple[list, dict]:
        """The phases after the first: the family's declared revision (none, a window, a target or a nearest probe) and,
        after a window revision, the preference between the two windows; with the slots the revision left."""
        first_slots = slots
        if lift.revision == "revise_window":
            phase, slots = self._revise_window(task, lift, family, slots, outputs, choose)
        elif lift.revision == "revise_target":
            phase, slots = self._revise_target(task, lift, family, slots, outputs, choose)
        elif lift.revision == "probe_nearest":
            phase, slots = self._probe_nearest(task, lift, slots, outputs, choose)
        else:
            phase = None
        if phase is None:  # no revision declared, or none found inside the split's time block
            return [], slots
        if lift.prefer and phase.obligation == "revise_window":
            preference = self._prefer(lift, family, first, phase, outputs, [first_slots, slots])
            return [phase, *([preference] if preference is not None else [])], slots
        return [phase], slots

    def _commitment(
        self, task: Task, lift: FamilyLift, family: Family, windows: list[dict], outputs: dict, choose: Chooser
    ) -> CommitmentPhase:
        """The reporting commitment on the stream the task is about (or the one a declared gold field names), for the
        windows asked about (first and revised slots) or the instant looked up."""
        canonical = [c.model_dump() for c in task.canonical_calls]
        resolve, stream = _first_resolve(canonical), task.evidence_stream_ids[0]
        if family.commit_stream is not None:  # the commitment asks about the stream a gold field names
            stream = task.gold[family.commit_stream]
            row = self.store.streams[stream]
            resolve = next(
                c["id"]
                for c in canonical
                if c["tool"] == "resolve_point"
                and c["arguments"]["equipment"] == row["equipment"]
                and c["arguments"]["site"] == row["site_id"]
            )
        spans = [_span(s) for s in windows if "window_start" in s]
        if lift.commit_target == "window" and _holds_a_week(task):
            calls, answer, prompt = self._commit_window(task, stream, resolve, sorted(set(spans)), choose, outputs)
        else:  # a reading; also a week family's in a block of a short time plan that holds no whole calendar week
            near = (
                parse_us(task.gold.get("observed_timestamp") or windows[0]["timestamp_iso"])
                if lift.commit_target == "timestamp"
                else min((start for start, _ in spans), default=task.time_block[0])
            )
            calls, answer, prompt = self._commit_timestamp(task, stream, resolve, near, choose, outputs)
        return CommitmentPhase(
            obligation="commit",
            prompt=prompt,
            gold=answer,
            form=self._form(["decision", "reason"]),
            canonical_calls=as_calls(calls),
            evidence_stream_ids=[stream],
        )

    def _follow_up(self, kind: str, answer: dict, evidence: list[str]) -> FollowUp:
        if kind == "rationale":  # why the commitment went the way it did: its quality reason
            return FollowUp(
                kind="rationale",
                prompt=self.cfg.rationale_prompt,
                gold={"reason": answer["reason"]},
                form=self._form(["reason"]),
            )
        return FollowUp(
            kind="evidence",
            prompt=self.cfg.evidence_prompt,
            gold={"stream_ids": evidence},
            form=self._form(["stream_ids"]),
        )

    def lift(self, task: Task, complete: bool | None = None) -> tuple[dict, dict]:
        """(episode fields, provenance) for one task; raises LiftError or GoldError when it cannot be lifted.

        Of a family that withholds a slot, a `complete_share` of the episodes (drawn by hash, apart from the gold) are
        complete: the opening is the withheld variant's followed by the very reply naming the slot, and nothing is
        withheld; all else is the same. `complete` forces the variant (the preflight lifts a row's other one)."""
        lift, family = self.cfg.families[task.family], self.families[task.family]
        episode_id = f"{task.task_id}.ep"
        choose = Chooser(self.seed, episode_id)
        slots = self._slots(task)
        withheld = self._withheld(task, lift, slots, choose)
        initial = self._say(lift.initial, "initial", slots, choose)
        if self._leaks(initial, withheld, task):  # in either variant: which tasks lift never depends on it
            raise LiftError("the withheld slot shows in the initial message")
        if complete is None:
            complete = choose.fraction("complete_variant") < self.cfg.complete_share
        if complete and withheld:  # the user says it up front, in the words of the reply
            initial, withheld = " ".join([initial, *(w.reply for w in withheld)]), []
        outputs: dict = {}
        phases = [self._first_phase(task, lift, family, initial, outputs)]
        obligations = [f"clarify_{w.slot}" for w in withheld] + [phases[0].obligation]
        first_slots = slots
        revisions, slots = self._revisions(task, lift, family, phases[0], slots, outputs, choose)
        phases += revisions
        obligations += [p.obligation for p in revisions]
        commitment = self._commitment(task, lift, family, [first_slots, slots], outputs, choose)
        phases.append(commitment)
        obligations.append("commit")
        answer = commitment.gold
        evidence = sorted({s for p in phases for s in p.evidence_stream_ids})
        follow_ups = [self._follow_up(kind, answer, evidence) for kind in lift.follow_ups]
        obligations += list(lift.follow_ups)
        calls_total = sum(len(p.canonical_calls) for p in phases)
        budget = max(12, calls_total + len(phases) + len(withheld) + len(follow_ups) + 1)
        fields = {
            "id": episode_id,
            "corpus": task.corpus,
            "split": task.split,
            "family": task.family,
            "task_id": task.task_id,
            "site_ids": task.site_ids,
            "interaction_mode": "+".join(obligations),
            "obligations": obligations,
            "initial_message": initial,
            "hidden_instruction": task.query,
            "withheld": withheld,
            "phases": phases,
            "follow_ups": follow_ups,
            "stop_reply": self.cfg.stop_reply,
            "nudge_reply": self.cfg.nudge,
            "idle_reply": self.cfg.after_release,
            "commitment_outcome": answer["decision"],
            "evidence_stream_ids": evidence,
            "turn_budget": budget,
            "difficulty": {**task.difficulty, "tool_calls": calls_total, "phases": len(phases)},
            "provenance_ref": episode_id,
        }
        provenance = {
            "id": episode_id,
            "task_id": task.task_id,
            "task_provenance": task.provenance,
            "selection_key": task.selection_key,
            "first_window": first_slots.get("window_start_iso"),
            "revised_slots": {k: v for k, v in slots.items() if k.endswith("_iso")},
        }
        return fields, provenance
