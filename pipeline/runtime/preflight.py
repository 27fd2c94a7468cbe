"""Contract preflight: coded checks over every episode; a release needs zero issues."""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from contracts.episodes import Episode, EpisodesConfig
from contracts.tasks import SPLITS, FamiliesConfig, Family
from pipeline.core.errors import LiftError
from pipeline.episodes.calls import phase_gold
from pipeline.episodes.rules import (
    BAND_OUTCOME,
    NEAREST_FIELDS,
    over_share,
    preferred_window,
    quality_decision_answer,
    timestamp_commitment,
)
from pipeline.episodes.stage import Variants
from pipeline.runtime import contract
from pipeline.runtime.simulator import asking, slot_keywords
from pipeline.tasks import gold, grading, render
from pipeline.tools import registry
from pipeline.tools.access import ToolStore
from pipeline.tools.functions import window_band

REVISIONS = ("revise_window", "revise_target", "probe_nearest", "prefer", "commit")
CHECKS = (
    "phase_count",
    "final_phase_is_commitment",
    "commit_options_identical",
    "required_fields_present",
    "gold_passes_own_checks",
    "golds_rederived",
    "timestamp_golds_via_exact_and_nearest",
    "quality_golds_vs_thresholds",
    "evidence_ids_exist",
    "withheld_slot_not_in_first_message",
    "form_depends_on_withholding",
    "doubled_word",
    *contract.CHECKS,
    "same_question_different_gold",
    "answers_balanced",
)


DECLARED_GOLD = (
    "lookup",
    "aggregate",
    "compare",
    "rank",
    "timestamp_value",
)  # phase types whose gold the family declares


def rederive(phase: Any, outputs: dict, thresholds: dict, acceptable: float, family: Family) -> dict:
    """A phase's gold recomputed from the outputs of its canonical calls: by the family's declared gold for the phases
    that answer the family's question (first and revised), by the episode rules for the others."""
    last = outputs[phase.canonical_calls[-1].id]
    kind = phase.type
    if kind in DECLARED_GOLD:
        return gold.extract(phase_gold(family.canonical, [c.id for c in phase.canonical_calls]), outputs)
    if kind == "nearest_timestamp":
        return {k: last[k] for k in NEAREST_FIELDS}
    if kind == "quality_decision":
        return quality_decision_answer(last)
    if kind == "preference":  # calls ..q<window><side>: the sides of the first window, then of the second
        return {
            "preferred": preferred_window(
                *([outputs[c.id] for c in phase.canonical_calls if c.id[-2] == w] for w in "12")
            )
        }
    first = outputs[phase.canonical_calls[0].id]
    if "quality_band" in first:
        decision, reason = BAND_OUTCOME[first["quality_band"]]
    else:
        decision, reason = timestamp_commitment(
            first["offset_seconds"], last["step_seconds"], acceptable, thresholds["gap_ratio_abstain_window"]
        )
    return {"decision": decision, "reason": reason}


def _shape_failures(episode: Episode, cfg: EpisodesConfig) -> list[str]:
    """The checks on the episode's shape: its phases, the commitment's options and every step's gold."""
    failed = []
    revisions = [o for o in episode.obligations if o in REVISIONS]
    if len(episode.phases) != 1 + len(revisions):
        failed.append("phase_count")
    if episode.phases[-1].type != "commitment":
        failed.append("final_phase_is_commitment")
    if not episode.phases[-1].prompt.endswith(cfg.commit_options):
        failed.append("commit_options_identical")
    steps = [*episode.phases, *episode.follow_ups]
    if any(step.gold.get(f) in (None, "", []) for step in steps for f in step.form.names):
        failed.append("required_fields_present")
    if any(not grading.passes(step.form, step.gold, step.gold) for step in steps):
        failed.append("gold_passes_own_checks")
    return failed


def _phase_failures(phase: Any, outputs: dict, store: ToolStore, cfg: EpisodesConfig, family: Family) -> list[str]:
    """The checks on one phase's gold against its canonical calls' outputs (re-derived, and by a second route)."""
    failed = []
    again = rederive(phase, outputs, store.thresholds, cfg.acceptable_offset_seconds, family)
    if set(again) != set(phase.gold) or not grading.passes(phase.form, phase.gold, again):
        failed.append("golds_rederived")
    if phase.type in ("timestamp_value", "nearest_timestamp"):
        stream = phase.evidence_stream_ids[0]
        exact = registry.call(
            store,
            "lookup_observation",
            {"stream_id": stream, "timestamp": phase.gold["observed_timestamp"], "mode": "exact"},
        )
        if not exact.get("exact_match_found") or exact.get("value") != phase.gold["value"]:
            failed.append("timestamp_golds_via_exact_and_nearest")
    if phase.type == "quality_decision":
        result = outputs[phase.canonical_calls[-1].id]
        clean = result["duplicate_fraction"] == 0 and result["nan_fraction"] == 0
        if window_band(store, result["coverage"], result["gap_ratio"], clean) != phase.gold["quality_band"]:
            failed.append("quality_golds_vs_thresholds")
    return failed


def form_depends_on_withholding(episode: Episode, variants: Variants) -> bool:
    """Whether an answer form (of a phase or a follow-up) differs between the episode and its other variant, lifted
    again from its task with the slot withheld or said up front; a variant that does not lift differs too. The form
    says what to answer, never what is missing."""
    try:
        other = variants.other(episode)
    except (LiftError, gold.GoldError, render.RenderError):
        return True
    if other is None:  # its family withholds nothing
        return False
    forms = [[step.form for step in (*e.phases, *e.follow_ups)] for e in (episode, other)]
    return forms[0] != forms[1]


def messages(episode: Episode) -> list[str]:
    """Every text of the episode the agent may read, or that a release holds: the user's messages as sent (prompts
    with their answer forms' sentences), the slot replies, the fixed replies, the code meanings and the hidden
    instruction."""
    steps = [*episode.phases, *episode.follow_ups]
    texts = [asking(step.prompt, step.form) for step in steps]
    texts += [w.reply for w in episode.withheld]
    texts += [episode.stop_reply, episode.nudge_reply, episode.idle_reply, episode.hidden_instruction]
    texts += [meaning for step in steps for f in step.form.fields for meaning in (f.codes or {}).values()]
    return texts


def check_episode(
    episode: Episode,
    store: ToolStore,
    cfg: EpisodesConfig,
    families: FamiliesConfig,
    variants: Variants | None = None,
) -> list[str]:
    """Names of the checks this episode fails (empty: it passes every one); without `variants` (no tasks folder)
    form_depends_on_withholding is not checked."""
    failed = _shape_failures(episode, cfg)
    outputs: dict = {}
    try:
        for phase in episode.phases:
            outputs = gold.execute(store, [c.model_dump() for c in phase.canonical_calls], outputs)
            failed += _phase_failures(phase, outputs, store, cfg, families.families[episode.family])
    except (gold.GoldError, KeyError, IndexError, TypeError):
        failed.append("golds_rederived")
    if any(s not in store.streams for s in episode.evidence_stream_ids):
        failed.append("evidence_ids_exist")
    if any(w.value.lower() in episode.initial_message.lower() for w in episode.withheld):
        failed.append("withheld_slot_not_in_first_message")
    if variants is not None and form_depends_on_withholding(episode, variants):
        failed.append("form_depends_on_withholding")
    if any(render.doubled_words(text) for text in messages(episode)):
        failed.append("doubled_word")
    failed += contract.contract_failures(episode, store, slot_keywords(cfg))
    return sorted(set(failed))


def ambiguous_questions(episodes: list[Episode]) -> set[str]:
    """Episodes whose question, as the agent sees it (the first message and the replies to its clarifications), is
    another episode's too while their golds differ: no agent could tell which gold is meant (design/VALIDITY.md §5)."""
    asked: dict[str, list[Episode]] = {}
    for episode in episodes:  # a slot said up front or told when asked: the same words either way
        asked.setdefault(" ".join([episode.initial_message, *(w.reply for w in episode.withheld)]), []).append(episode)
    ambiguous = set()
    for group in asked.values():
        first = group[0].phases[0]
        if any(not grading.passes(first.form, first.gold, other.phases[0].gold) for other in group[1:]):
            ambiguous |= {e.id for e in group}
    return ambiguous


def preflight(
    episodes: list[Episode],
    store: ToolStore,
    cfg: EpisodesConfig,
    families: FamiliesConfig,
    variants: Variants | None = None,
) -> dict:
    """Issue counts by check, family and split; `issue_count` must be 0 for a release. `variants` lifts each row's
    other variant from the tasks stage's output; without it (a release alone) the checks it needs are `unchecked`."""
    by_check, by_family, by_split, rows = Counter(), Counter(), Counter(), {}
    ambiguous = ambiguous_questions(episodes)
    for episode in episodes:
        failed = check_episode(episode, store, cfg, families, variants) + (
            ["same_question_different_gold"] if episode.id in ambiguous else []
        )
        if failed:
            rows[episode.id] = failed
            by_family[episode.family] += len(failed)
            by_split[episode.split] += len(failed)
            by_check.update(failed)
    balance = balance_counts(episodes, cfg)
    unbalanced = unbalanced_verdicts(episodes, cfg)
    by_check["answers_balanced"] += len(unbalanced)  # one issue per split (or corpus) and verdict one value dominates
    return {
        "episodes": len(episodes),
        "issue_count": sum(by_check.values()),
        "balanced_answers": balance,
        "unbalanced_verdicts": unbalanced,
        "by_check": {check: by_check.get(check, 0) for check in CHECKS},
        "by_family": dict(sorted(by_family.items())),
        "by_split": dict(sorted(by_split.items())),
        "failing_episodes": dict(sorted(rows.items())[:50]),
        "unchecked": [] if variants is not None else ["form_depends_on_withholding"],
    }


def answer_code(episode: Episode, obligation: str, name: str) -> str | None:
    """The code a row's phase of this obligation answers with, or None when the row has no such phase."""
    for phase in episode.phases:
        if phase.obligation == obligation and isinstance(phase.gold.get(name), str):
            return phase.gold[name]
    return None


def balance_counts(episodes: list[Episode], cfg: EpisodesConfig) -> dict[str, dict[str, int]]:
    """The golds of each balanced obligation (configs/episodes.toml balanced_answers), per code."""
    counts = {}
    for obligation, name in sorted(cfg.balanced_answers.items()):
        codes = Counter(code for e in episodes if (code := answer_code(e, obligation, name)) is not None)
        counts[obligation] = dict(sorted(codes.items()))
    return counts


COMMITMENT = "commitment"  # the verdict name of the commitment outcome among the balanced verdicts


def verdicts(episode: Episode, cfg: EpisodesConfig) -> dict[str, str]:
    """The verdicts of a row an agent could guess blind: its commitment outcome, and the code of each balanced
    obligation (configs/episodes.toml balanced_answers) it answers."""
    found = {COMMITMENT: episode.commitment_outcome} if episode.phases[-1].type == "commitment" else {}
    for obligation, name in sorted(cfg.balanced_answers.items()):
        code = answer_code(episode, obligation, name)
        if code is not None:
            found[obligation] = code
    return found


def unbalanced_verdicts(episodes: list[Episode], cfg: EpisodesConfig) -> list[dict]:
    """Each split (then the corpus) and verdict whose most common value is more than balance_max_share of its rows of
    that verdict, where it has balance_min_rows of them: split, verdict, value, count, rows and share."""
    found = []
    for split in (*SPLITS, None):
        counts: dict[str, Counter] = defaultdict(Counter)
        for episode in episodes:
            if split is None or episode.split == split:
                for verdict, value in verdicts(episode, cfg).items():
                    counts[verdict][value] += 1
        for verdict, values in sorted(counts.items()):
            top = over_share(values, cfg.balance_max_share, cfg.balance_min_rows)
            if top is not None:
                rows = sum(values.values())
                found.append(
                    {
                        "split": split or "corpus",
                        "verdict": verdict,
                        "value": top,
                        "count": values[top],
                        "rows": rows,
                        "share": round(values[top] / rows, 4),
                    }
                )
    return found
