"""Shortcut policies: one template-reading solver whose switches each remove one capability.

A policy sees only the conversation (user turns, its own actions, tool results) and public
metadata (stream labels, site labels: what list_points shows). It reads user turns by inverting
the declared templates, resolves phrases to streams, calls the tools by the families' canonical
call templates and answers from their outputs.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from contracts.episodes import Episode, EpisodesConfig
from contracts.tasks import FamiliesConfig
from pipeline.audit.guessers import Guesser, clock
from pipeline.audit.probe import surface_features
from pipeline.audit.reading import (
    Catalog,
    day_window,
    month_window,
    read,
    read_opening,
    split_list,
    week_window,
)
from pipeline.core.timeunits import DAY_US
from pipeline.episodes.calls import _rename
from pipeline.episodes.rules import (
    BAND_OUTCOME,
    NEAREST_FIELDS,
    preferred_window,
    quality_decision_answer,
    timestamp_commitment,
)
from pipeline.runtime.agents import Agent, Observation
from pipeline.runtime.simulator import words_of
from pipeline.tasks import gold, render
from pipeline.tasks.grading import instant
from pipeline.tasks.probes import grid_point
from pipeline.tools import rounding
from pipeline.tools.access import ToolStore
from pipeline.tools.timeutil import format_us, parse_us

Step = Generator[dict, Any, None]
QUESTIONS = {"site": "Which site or building is it?", "time": "Which date and time (UTC)?"}


class ShortcutPolicy(Agent):
    """A bounded rule-based solver; `lacks` names the one capability it does not have. Its `kind` (configs/audit.toml)
    may swap a capability for a cheap strategy: one canned question, a guessed commitment, grid lookups."""

    def __init__(
        self,
        name: str,
        lacks: str,
        store: ToolStore,
        families: FamiliesConfig,
        lifts: EpisodesConfig,
        kind: str = "shortcut",
        guesser: Guesser | None = None,
        rule: tuple[int, str] | None = None,
    ) -> None:
        self.name, self.lacks, self.kind, self.guesser, self.rule = name, lacks, kind, guesser, rule
        self.catalog, self.store = Catalog(store), store
        self.families, self.lifts = families, lifts
        self.exact_only = lacks == "nearest" and kind == "shortcut"  # grid rules stand in for nearest lookups instead

    # ------------------------------------------------------------------ agent interface
    def start(
        self, episode: Episode
    ) -> None:  # only the id and split are used: a policy never reads gold or hidden text
        self.split = episode.split  # a guesser remembers the other splits only
        self.opening = ""
        self.decision: str | None = None
        self.step: Step | None = None
        self.slots: dict[str, Any] = {}
        self.family: str | None = None
        self.first_answer: dict | None = None
        self.used: set[str] = set()
        self.reason: str | None = None
        self.steps_done = 0
        self.windows: list[dict] = []
        self.observation: Observation | None = None

    def act(self, observation: Observation) -> Any:
        self.observation = observation
        last = observation.messages[-1]
        if self.step is not None:
            try:
                return self.step.send(last.get("result") if last["role"] == "tool" else words_of(last))
            except StopIteration:
                self.step = None
        self.step = self._next_step(words_of(last))
        return next(self.step)

    # ------------------------------------------------------------------ dispatch
    def _next_step(self, text: str) -> Step:
        first = self.steps_done == 0
        self.steps_done += 1
        if self.lacks == "carry_state" and not first:
            self.slots, self.family = {}, None  # each phase re-resolved from its own prompt
        if first:
            return self._first(text)
        if text == self.lifts.evidence_prompt:
            return self._answer({"stream_ids": sorted(self.used)})
        if text == self.lifts.rationale_prompt:
            return self._answer({"reason": self.reason} if self.reason else {})
        commit = read(
            [*self.lifts.commit_window_prompts, *self.lifts.commit_timestamp_prompts],
            text.replace(self.lifts.commit_options, "{options}"),
        )
        if commit is not None:
            return self._commit(commit, text)
        if self.lacks == "revise":
            return self._answer(self.first_answer or {})
        return self._revision(text)

    def _answer(self, fields: dict) -> Step:
        yield {"kind": "answer", "text": "; ".join(f"{k}: {v}" for k, v in fields.items()), "fields": fields}

    def _call(self, calls: list[dict], prefix: str) -> Generator[dict, Any, dict]:
        """Issue calls one by one (ids prefixed so phases never collide); return outputs by original id."""
        names = {c["id"]: f"{prefix}{c['id']}" for c in calls}
        outputs = {}
        for call in calls:
            arguments = _rename(call["arguments"], names)
            if (
                self.kind == "grid_rules"
                and call["tool"] == "lookup_observation"
                and arguments.get("mode") == "nearest"
            ):
                result = yield from self._grid_lookup(names[call["id"]], arguments)
            else:
                result = yield {
                    "kind": "call_tool",
                    "name": call["tool"],
                    "id": names[call["id"]],
                    "arguments": arguments,
                }
            outputs[call["id"]] = result if isinstance(result, dict) else {}
        return outputs

    def _grid_lookup(self, call_id: str, arguments: dict) -> Generator[dict, Any, dict]:
        """A nearest lookup done by one exact lookup where the policy's grid rule puts the probe (rounded down, up or
        to nearest on its grid); a reading found there is reported as the nearest, with its offset."""
        probe = instant(arguments.get("timestamp"))
        if probe is None or self.rule is None:
            return {}
        point = grid_point(probe, *self.rule)
        result = yield {
            "kind": "call_tool",
            "name": "lookup_observation",
            "id": call_id,
            "arguments": {**arguments, "timestamp": format_us(point), "mode": "exact"},
        }
        if not isinstance(result, dict) or not result.get("exact_match_found"):
            return result if isinstance(result, dict) else {}
        return {
            **result,
            "requested_timestamp": arguments["timestamp"],
            "mode": "nearest",
            "exact_match_found": point == probe,
            "offset_seconds": rounding.seconds(point - probe),
            "fallback_reason": None if point == probe else "nearest_observation",
        }

    # ------------------------------------------------------------------ reading
    def _site_of(self, text: str) -> str | None:
        reply = read([self.lifts.slots["site"].reply], text)
        return self.catalog.site(reply["site_label"]) if reply else None

    def _time_of(self, family: str, text: str) -> dict | None:
        template = self.lifts.families[family].time_reply
        return read([template], text) if template else None

    def _first(self, text: str) -> Step:
        family, slots, missing = read_opening(self.lifts, text)
        if slots is not None and "site_label" in slots:  # a complete opening ends with the site
            slots["site_id"] = self.catalog.site(slots.pop("site_label"))
        self.opening = text
        if self.kind == "canned_clarification" and missing:  # one question naming every kind of slot, when one is
            reply = yield {"kind": "ask_user", "text": " ".join(QUESTIONS[k] for k in sorted(QUESTIONS))}
            for line in (reply or "").splitlines():
                site = self._site_of(line)
                if site is not None:
                    (slots if slots is not None else {}).update(site_id=site)
                elif family is not None:
                    slots.update(self._time_of(family, line) or {})
        if family is None:
            yield from self._answer({})
            return
        self.family, self.slots = family, slots
        if missing and self.lacks != "clarify" and self.kind != "canned_clarification":
            reply = yield {"kind": "ask_user", "text": QUESTIONS[missing]}
            if missing == "site":
                self.slots["site_id"] = self._site_of(reply or "")
            else:
                self.slots.update(self._time_of(family, reply or "") or {})
        answer = yield from self._solve("s1_")
        self.first_answer = answer
        yield from self._answer(answer)

    # ------------------------------------------------------------------ solving a phase of the family
    def _streams(self) -> list[str]:
        s, site = self.slots, self.slots.get("site_id")
        if "left_phrase" in s:
            return [*self.catalog.by_phrase(s["left_phrase"])[:1], *self.catalog.by_phrase(s["right_phrase"])[:1]]
        if "member_list" in s:
            sites = [self.catalog.site(label) for label in split_list(s["member_list"])]
            return self.catalog.by_class_phrase(s["class_phrase"], [x for x in sites if x])
        phrase = s.get("phrase") or s.get("local_phrase")
        found = self.catalog.by_phrase(phrase, site) if phrase else []
        return found if len(found) == 1 else []

    def _window(self) -> dict | None:
        s = self.slots
        if "anchor_iso" in s:
            end = parse_us(s["anchor_iso"])
            return {
                "window_start_iso": format_us(end - DAY_US),
                "window_end_iso": s["anchor_iso"],
                "anchor_iso": s["anchor_iso"],
            }
        for key, window in (("month_name", month_window), ("week_start", week_window), ("day", day_window)):
            if key in s:
                start, end = window(s[key])
                return {"window_start_iso": format_us(start), "window_end_iso": format_us(end)}
        return None

    def _canonical_slots(self, streams: list[str]) -> dict | None:
        family = self.family
        rows = [self.store.streams[s] for s in streams]
        if not rows or family is None:
            return None
        slots = {"point_class": rows[0]["point_class"], **{k: v for k, v in self.slots.items() if k.endswith("_iso")}}
        window = self._window()
        if window:
            slots.update(window)
        shape = self.families.families[family].target_shape
        if shape == "pair":
            if len(rows) != 2:
                return None
            slots.update(
                left_site_id=rows[0]["site_id"],
                right_site_id=rows[1]["site_id"],
                left_equipment=rows[0]["equipment"],
                right_equipment=rows[1]["equipment"],
            )
        elif shape == "members":
            slots["members"] = [
                {"stream_id": r["stream_id"], "site_id": r["site_id"], "equipment": r["equipment"]} for r in rows
            ]
        else:
            slots.update(site_id=rows[0]["site_id"], equipment=rows[0]["equipment"])
        return slots

    def _solve(self, prefix: str) -> Generator[dict, Any, dict]:
        streams = self._streams()
        slots = self._canonical_slots(streams)
        if slots is None:
            return {}
        spec = self.families.families[self.family].canonical
        try:
            calls = render.calls(spec, slots)
        except render.RenderError:
            return {}
        if self.exact_only:
            calls = [
                {**c, "arguments": {**c["arguments"], "mode": "exact"}} if c["tool"] == "lookup_observation" else c
                for c in calls
            ]
        known = set(streams) <= self.used
        if known and self.lacks != "carry_state":
            calls = self._reuse_resolved(calls, streams)
        outputs = yield from self._call(calls, prefix)
        try:
            answer = gold.extract(spec.gold, outputs)
        except gold.GoldError:
            return {}
        if (
            self.lifts.families[self.family].phase == "quality_decision"
        ):  # the phase asks for the band the gold decides on
            answer = quality_decision_answer(outputs[calls[-1]["id"]])
        self.used.update(streams)
        self.windows.append({**slots, "streams": streams})
        return answer

    def _reuse_resolved(self, calls: list[dict], streams: list[str]) -> list[dict]:
        """Streams already resolved in an earlier phase are used directly: their resolve calls are dropped."""
        resolved = {}
        for call in calls:
            if call["tool"] == "resolve_point":
                args = call["arguments"]
                match = [
                    s
                    for s in streams
                    if self.store.streams[s]["site_id"] == args.get("site")
                    and self.store.streams[s]["equipment"] == args.get("equipment")
                ]
                if len(match) == 1:
                    resolved[f"${call['id']}.stream_id"] = match[0]
        kept = [c for c in calls if not (c["tool"] == "resolve_point" and f"${c['id']}.stream_id" in resolved)]

        def literal(value: Any) -> Any:
            if isinstance(value, str):
                return resolved.get(value, value)
            if isinstance(value, list):
                return [literal(v) for v in value]
            if isinstance(value, dict):
                return {k: literal(v) for k, v in value.items()}
            return value

        return [{**c, "arguments": literal(c["arguments"])} for c in kept]

    # ------------------------------------------------------------------ later phases
    def _revision(self, text: str) -> Step:
        family = self.family
        candidates = [family] if family else sorted(self.lifts.families)
        for name in candidates:
            lift = self.lifts.families[name]
            if lift.prefer and text == lift.prefer_prompt:
                yield from self._prefer(name)
                return
            new = read(lift.revision_prompts, text)
            if new is not None:
                break
        else:
            yield from self._answer({})
            return
        self.family = self.family or name
        if "probe_iso" in new:
            yield from self._probe(new["probe_iso"])
            return
        if "local_phrase" in new:  # another target at the same site
            self.slots.pop("phrase", None)
        self.slots.update({k: v for k, v in new.items() if k != "direction"})
        answer = yield from self._solve(f"s{self.steps_done}_")
        yield from self._answer(answer)

    def _probe(self, probe_iso: str) -> Step:
        streams = self._streams()
        if len(streams) != 1:
            yield from self._answer({})
            return
        mode = "exact" if self.exact_only else "nearest"
        out = yield from self._call(
            [
                {
                    "id": "p",
                    "tool": "lookup_observation",
                    "arguments": {"stream_id": streams[0], "timestamp": probe_iso, "mode": mode},
                }
            ],
            f"s{self.steps_done}_",
        )
        result = out["p"]
        yield from self._answer({k: result.get(k) for k in NEAREST_FIELDS})

    def _prefer(self, family: str) -> Step:
        if len(self.windows) < 2 or len(self.windows[0]["streams"]) != 2:
            yield from self._answer({})
            return
        calls = [
            {
                "id": f"q{w}{s}",
                "tool": "inspect_quality_window",
                "arguments": {
                    "stream_id": self.windows[w - 1]["streams"][s - 1],
                    "window_start": self.windows[w - 1]["window_start_iso"],
                    "window_end": self.windows[w - 1]["window_end_iso"],
                    "period": self.families.families[family].period,
                },
            }
            for w in (1, 2)
            for s in (1, 2)
        ]
        out = yield from self._call(calls, f"s{self.steps_done}_")
        yield from self._answer({"preferred": preferred_window(*([out[f"q{w}{s}"] for s in (1, 2)] for w in (1, 2)))})

    def _commit(self, slots: dict, text: str) -> Step:
        streams = self.catalog.by_phrase(slots["phrase"])
        if len(streams) != 1:
            yield from self._answer({})
            return
        stream, prefix = streams[0], f"s{self.steps_done}_"
        if self.kind == "majority_commitment":  # no quality tool: at most the reading the question names
            yield from self._commit_unread(slots, stream, prefix, text)
            return
        if "week_start" in slots:
            start, end = week_window(slots["week_start"])
            out = yield from self._call(
                [
                    {
                        "id": "w",
                        "tool": "inspect_quality_window",
                        "arguments": {
                            "stream_id": stream,
                            "window_start": format_us(start),
                            "window_end": format_us(end),
                            "period": "week",
                        },
                    }
                ],
                prefix,
            )
            band = out["w"].get("quality_band")
            decision, reason = BAND_OUTCOME.get(band, ("answer", "healthy_quality"))
            if self.lacks == "abstain":
                decision, reason = "answer", "healthy_quality"
        else:
            mode = "exact" if self.exact_only else "nearest"
            out = yield from self._call(
                [
                    {
                        "id": "l",
                        "tool": "lookup_observation",
                        "arguments": {"stream_id": stream, "timestamp": slots["probe_iso"], "mode": mode},
                    },
                    {"id": "q", "tool": "inspect_quality", "arguments": {"stream_id": stream}},
                ],
                prefix,
            )
            offset = out["l"].get("offset_seconds")
            if offset is None:
                yield from self._answer({})
                return
            decision, reason = timestamp_commitment(
                offset,
                out["q"].get("step_seconds"),
                self.lifts.acceptable_offset_seconds,
                self.store.thresholds["gap_ratio_abstain_window"],
            )
            if self.lacks == "abstain":
                decision, reason = "answer", "exact_timestamp" if offset == 0 else "nearest_but_acceptable"
        if self.guesser is not None:  # looks up as told, then ignores what quality says: the outcome remembered alike
            decision, reason = self._guess(slots, text, stream)
        self.used.add(stream)
        self.reason, self.decision = reason, decision
        yield from self._answer({"decision": decision, "reason": reason})

    def _guess(self, slots: dict, text: str, stream: str) -> tuple[str, str]:
        at = week_window(slots["week_start"])[0] if "week_start" in slots else instant(slots.get("probe_iso"))
        features = surface_features(self.family or "", self.opening, text, at, self.lifts)
        when = clock(at, self.guesser.zone_of(stream), "probe_iso" in slots)
        return self.guesser.guess(self.split, self.family, features, at, when)

    def _commit_unread(self, slots: dict, stream: str, prefix: str, text: str) -> Step:
        """The commitment of a policy that calls no quality tool: the nearest reading at the instant asked about, if
        one is (the reading, not its quality), then the guesser's outcome."""
        if "probe_iso" in slots:
            yield from self._call(
                [
                    {
                        "id": "l",
                        "tool": "lookup_observation",
                        "arguments": {"stream_id": stream, "timestamp": slots["probe_iso"], "mode": "nearest"},
                    }
                ],
                prefix,
            )
        decision, reason = self._guess(slots, text, stream)
        self.used.add(stream)
        self.reason, self.decision = reason, decision
        yield from self._answer({"decision": decision, "reason": reason})
