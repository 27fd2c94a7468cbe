"""Answer forms from the catalogue of configs/answers.toml: the one place a question's fields, units, codes and
tolerances are put together (tasks, episodes and every agent read the forms; the grader grades by them)."""

from __future__ import annotations

from typing import Any

from contracts.answers import AnswerForm, AnswersConfig, FormField, Tolerance
from contracts.tasks import GoldField
from pipeline.tools import refs
from pipeline.tools.access import ToolStore

GRADING = {
    "timestamp": "Graded as an instant: any offset passes.",
    "stream_id": "Graded exactly.",
    "stream_ids": "Graded as a set: order does not matter.",
    "code": "Codes match ignoring case, spaces, hyphens and underscores.",
}


class _Keep(dict):
    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


def _tolerance_text(tolerance: Tolerance, unit: str | None) -> str:
    unit_words = f" {unit}" if unit else ""
    if tolerance.rel == 0:
        return f"Graded: passes within {tolerance.abs:g}{unit_words} of the true value."
    return (
        f"Graded: passes within max({tolerance.abs:g}{unit_words}, {tolerance.rel * 100:g}% of the true value); "
        "a value rounded to 4 significant digits passes."
    )


def form(
    names: list[str],
    answers: AnswersConfig,
    units: dict[str, str | None] | None = None,
    tolerances: dict[str, Tolerance] | None = None,
    params: dict[str, Any] | None = None,
) -> AnswerForm:
    """The form of a question asking for `names`. `units`: field -> unit code of the stream it is about (for
    fields whose catalogue unit is 'stream'); `tolerances`: a family's own, which override the catalogue's;
    `params` fill the {names} written in code meanings (e.g. acceptable_offset_seconds)."""
    fields = []
    for name in names:
        spec = answers.fields[name]
        if spec.type == "number":
            unit = (units or {}).get(name) if spec.unit == "stream" else spec.unit
            declared = answers.units.get(unit) if unit else None
            tolerance = (tolerances or {}).get(name) or spec.tolerance or answers.default_tolerance
            symbols = declared.symbols if declared else []
            label = (symbols[0] if symbols else unit) if unit else None
            fields.append(
                FormField(
                    name=name,
                    type="number",
                    description=f"{spec.description} {_tolerance_text(tolerance, label)}",
                    unit=unit,
                    unit_symbols=symbols,
                    pint_unit=declared.pint if declared else None,
                    tolerance=tolerance,
                )
            )
            continue
        codes = (
            {c: m.format_map(_Keep(params or {})) for c, m in sorted(answers.codes[spec.codes].items())}
            if spec.codes
            else {}
        )
        fields.append(
            FormField(name=name, type=spec.type, description=f"{spec.description} {GRADING[spec.type]}", codes=codes)
        )
    return AnswerForm(fields=fields)


def field_units(store: ToolStore, gold: dict[str, GoldField], outputs: dict[str, Any]) -> dict[str, str | None]:
    """The unit code of each gold field: the unit the tool gives beside the value it reads ($c2.value -> $c2.unit: a
    meter's mean is a rate), else that of the stream beside it ($c2.value -> $c2.stream_id, $c1.left.value ->
    $c1.left.stream_id)."""
    units = {}
    for name, spec in gold.items():
        try:
            unit = refs.resolve(spec.ref.rsplit(".", 1)[0] + ".unit", outputs)
        except refs.ReferenceError_:
            unit = None
        if isinstance(unit, str):
            units[name] = unit
            continue
        try:
            stream = refs.resolve(spec.ref.rsplit(".", 1)[0] + ".stream_id", outputs)
        except refs.ReferenceError_:
            continue
        if isinstance(stream, str) and stream in store.streams:
            units[name] = store.streams[stream]["unit"]
    return units
