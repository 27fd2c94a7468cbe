"""A released row's golds by the second route, phase by phase, and their comparison with the released golds within
each answer form's tolerance (numbers: |a - g| <= max(abs, rel x |g|) after converting the unit; instants, codes and
stream ids equal)."""

from __future__ import annotations

from dataclasses import dataclass

from tests.second_route.golds import BAND_OUTCOME, UNITS, Corpus, Quantity, instant

MEAN_FAMILIES = ("day_mean_lookup", "relative_24h_mean_lookup", "window_mean_lookup")


@dataclass(frozen=True)
class Disagreement:
    row: str
    family: str
    where: str  # phases[i].field or follow_ups[j].field
    gold: object
    second: object
    why: str

    def line(self) -> str:
        return f"{self.row} {self.where}: gold {self.gold!r}, second route {self.second!r} ({self.why})"


def _ref(text: str, resolved: dict[str, str]) -> str | None:
    """'$c1.stream_id' -> the stream the second route resolved for call c1."""
    return resolved.get(text.removeprefix("$").split(".")[0]) if isinstance(text, str) else None


def _window(call: dict) -> tuple[int, int]:
    return instant(call["arguments"]["window_start"]), instant(call["arguments"]["window_end"])


class Walk:
    """The second route through one row: streams are resolved from what the questions name, carried across phases."""

    def __init__(self, corpus: Corpus, row: dict) -> None:
        self.corpus, self.row, self.resolved = corpus, row, {}
        self.commitment: tuple[str, str] | None = None

    def _calls(self, phase: dict, tool: str) -> list[dict]:
        for call in phase["canonical_calls"]:
            if call["tool"] == "resolve_point":
                a = call["arguments"]
                self.resolved[call["id"]] = self.corpus.resolve(a["site"], a["point_class"], a.get("equipment"))
        return [c for c in phase["canonical_calls"] if c["tool"] == tool]

    def phase(self, phase: dict) -> dict[str, object]:
        kind, family, c = phase["type"], self.row["family"], self.corpus
        if kind == "lookup":
            (call,) = [x for x in phase["canonical_calls"] if x["tool"] == "resolve_point"]
            self._calls(phase, "resolve_point")
            return {"stream_id": self.resolved[call["id"]]}
        if kind == "aggregate":
            (call,) = self._calls(phase, "aggregate_window")
            sid, (start, end) = _ref(call["arguments"]["stream_id"], self.resolved), _window(call)
            if family in MEAN_FAMILIES:
                return {"mean": c.mean(sid, start, end)}
            if family == "window_consumption_lookup":
                return {"consumption": c.consumption(sid, start, end)}
            return {"baseload": c.baseload(sid, start, end)}
        if kind == "compare":
            (call,) = self._calls(phase, "compare_window")
            (start, end), a = _window(call), call["arguments"]
            left, right = _ref(a["left_stream_id"], self.resolved), _ref(a["right_stream_id"], self.resolved)
            lm, rm = c.mean(left, start, end), c.mean(right, start, end)
            winner = None if lm.value == rm.value else (left if lm.value > rm.value else right)
            return {"left_mean": lm, "right_mean": rm, "winning_stream_id": winner}
        if kind == "rank":
            (call,) = self._calls(phase, "rank_window")
            start, end = _window(call)
            members = [_ref(s, self.resolved) for s in call["arguments"]["stream_ids"]]
            total = self.row["family"] == "consumption_rank"  # ranked by what each meter recorded, not its mean
            of = {sid: (c.consumption if total else c.mean)(sid, start, end) for sid in members}
            top = min((m for m in of if of[m].value is not None), key=lambda m: (-of[m].value, m))
            return {"top_stream_id": top, ("top_consumption" if total else "top_mean"): of[top]}
        if kind in ("timestamp_value", "nearest_timestamp"):
            (call,) = self._calls(phase, "lookup_observation")
            sid = _ref(call["arguments"]["stream_id"], self.resolved)
            found = c.reading(sid, instant(call["arguments"]["timestamp"]), nearest=kind == "nearest_timestamp")
            if found is None:  # no reading at exactly that instant
                return {"value": Quantity(None, None), "observed_timestamp": None}
            fields = ("value", "observed_timestamp") if kind == "timestamp_value" else tuple(found)
            return {k: found[k] for k in fields}
        if kind == "quality_decision":
            (call,) = self._calls(phase, "inspect_quality_window")
            return {"quality_band": c.week_band(_ref(call["arguments"]["stream_id"], self.resolved), *_window(call))}
        if kind == "preference":
            return {"preferred": self._preferred(self._calls(phase, "inspect_quality_window"))}
        if kind == "commitment":
            self.commitment = self._commitment(phase)
            return dict(zip(("decision", "reason"), self.commitment, strict=True))
        raise AssertionError(f"{self.row['id']}: phase type {kind!r} has no definition in the second route")

    def _preferred(self, calls: list[dict]) -> str | None:
        """The window whose data to trust more: the higher worst coverage of the streams compared, then the lower worst
        gap ratio; None on a tie. The calls come window by window (q1*: the first window, q2*: the revised one)."""
        scores = []
        for w in ("1", "2"):
            shown = [
                self.corpus.shown_quality(_ref(x["arguments"]["stream_id"], self.resolved), *_window(x))
                for x in calls
                if x["id"].removeprefix("p3_q").startswith(w)
            ]
            scores.append((min(cov for cov, _ in shown), -max(1e9 if r is None else r for _, r in shown)))
        return None if scores[0] == scores[1] else ("first" if scores[0] > scores[1] else "second")

    def _commitment(self, phase: dict) -> tuple[str, str]:
        calls = phase["canonical_calls"]
        sid = _ref(calls[0]["arguments"]["stream_id"], self.resolved)
        if calls[0]["tool"] == "inspect_quality_window":
            return BAND_OUTCOME[self.corpus.week_band(sid, *_window(calls[0]))]
        return self.corpus.reading_commitment(sid, instant(calls[0]["arguments"]["timestamp"]))

    def follow_up(self, follow_up: dict) -> dict[str, object]:
        if follow_up["kind"] == "rationale":
            return {"reason": self.commitment[1]}
        return {"stream_ids": sorted({s for s in self.resolved.values() if s is not None})}


def _code(text: object) -> object:
    return "".join(ch for ch in str(text).lower() if ch not in " -_") if text is not None else None


def agree(field: dict, gold: object, second: object) -> str | None:
    """Why the second route's value fails the answer form's field for this gold, or None when it passes."""
    kind = field["type"]
    if kind == "number":
        assert isinstance(second, Quantity), field["name"]
        if second.value is None or gold is None:
            return None if second.value is None and gold is None else "one side has no value"
        value = second.value
        if field["pint_unit"] and second.unit and second.unit != field["pint_unit"]:
            mine = UNITS.Quantity(value, second.unit)
            if mine.dimensionality != UNITS.Quantity(1, field["pint_unit"]).dimensionality:
                return f"unit: the form asks for {field['pint_unit']}, the definition gives {second.unit}"
            value = mine.to(field["pint_unit"]).magnitude
        tol = field["tolerance"]
        limit = max(tol["abs"], tol["rel"] * abs(gold))
        return None if abs(value - gold) <= limit else f"value off by {value - gold:.6g} (tolerance {limit:.6g})"
    if kind == "timestamp":
        return None if gold is not None and second is not None and instant(gold) == instant(second) else "instant"
    if kind == "stream_ids":
        return None if sorted(gold) == sorted(second) else "stream ids"
    if kind == "stream_id":
        return None if gold == second else "stream id"
    return None if _code(gold) == _code(second) else "code"


def shown(second: object) -> object:
    if isinstance(second, Quantity):
        return (None if second.value is None else float(second.value), second.unit)
    return second


def disagreements(corpus: Corpus, row: dict) -> list[Disagreement]:
    """Every gold field of the row (phases, then follow-ups) that the second route does not reach."""
    walk, out = Walk(corpus, row), []
    parts = [("phases", i, p, walk.phase) for i, p in enumerate(row["phases"])]
    parts += [("follow_ups", j, f, walk.follow_up) for j, f in enumerate(row["follow_ups"])]
    for name, index, part, derive in parts:
        second = derive(part)
        for field in part["form"]["fields"]:
            why = agree(field, part["gold"][field["name"]], second[field["name"]])
            if why is not None:
                where = f"{name}[{index}].{field['name']} ({part.get('obligation') or part.get('kind')})"
                out.append(
                    Disagreement(
                        row["id"], row["family"], where, part["gold"][field["name"]], shown(second[field["name"]]), why
                    )
                )
    return out
