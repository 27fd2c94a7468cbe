"""Typed multi-turn episodes: phases (a discriminated union), withheld slots, follow-ups, the stop reply."""

from __future__ import annotations

from typing import Annotated, Any, Literal, get_args

from pydantic import Field, model_validator

from contracts.answers import AnswerForm
from contracts.base import Frozen
from contracts.tasks import Call, Split

Obligation = Literal[
    "clarify_site",
    "clarify_time",
    "answer",
    "revise_window",
    "revise_target",
    "probe_nearest",
    "decide_quality",
    "prefer",
    "commit",
    "rationale",
    "evidence",
]
OBLIGATIONS = get_args(Obligation)  # in this order
Outcome = Literal["answer", "abstain", "re_clarify"]
OUTCOMES = get_args(Outcome)  # in this order
Reason = Literal[
    "healthy_quality",
    "low_coverage",
    "long_gap",
    "marginal_quality",
    "exact_timestamp",
    "nearest_but_acceptable",
    "timestamp_too_imprecise",
]


class _Phase(Frozen):
    obligation: Obligation = Field(description="What this phase asks of the agent.")
    prompt: str = Field(description="The user's words that open the phase (phase 0: the initial message).")
    gold: dict[str, Any]
    form: AnswerForm = Field(description="What the phase asks for (shown to the agent) and how its answer is graded.")
    canonical_calls: list[Call] = Field(description="Tool calls that reach the gold (ids unique in the episode).")
    acceptable_calls: list[list[Call]] = Field(default=[], description="Other call sets that reach it.")
    evidence_stream_ids: list[str]


class LookupPhase(_Phase):
    type: Literal["lookup"] = "lookup"


class AggregatePhase(_Phase):
    type: Literal["aggregate"] = "aggregate"


class ComparePhase(_Phase):
    type: Literal["compare"] = "compare"


class RankPhase(_Phase):
    type: Literal["rank"] = "rank"


class TimestampValuePhase(_Phase):
    type: Literal["timestamp_value"] = "timestamp_value"


class NearestTimestampPhase(_Phase):
    type: Literal["nearest_timestamp"] = "nearest_timestamp"


class QualityDecisionPhase(_Phase):
    type: Literal["quality_decision"] = "quality_decision"


class PreferencePhase(_Phase):
    type: Literal["preference"] = "preference"


class CommitmentPhase(_Phase):
    """The reporting commitment: answer, abstain or re_clarify, with a reason; same options in every row."""

    type: Literal["commitment"] = "commitment"


Phase = Annotated[
    LookupPhase
    | AggregatePhase
    | ComparePhase
    | RankPhase
    | TimestampValuePhase
    | NearestTimestampPhase
    | QualityDecisionPhase
    | PreferencePhase
    | CommitmentPhase,
    Field(discriminator="type"),
]


class WithheldSlot(Frozen):
    """A slot left out of the initial message; the simulator gives `reply` once the agent asks for it."""

    slot: Literal["site", "time"]
    value: str
    reply: str


class FollowUp(Frozen):
    """A question after the last phase: a rationale for a quality decision, or the evidence used."""

    kind: Literal["rationale", "evidence"]
    prompt: str
    gold: dict[str, Any]
    form: AnswerForm


class Episode(Frozen):
    """One multi-turn episode lifted from a static task."""

    id: str = Field(description="Episode id: the static task id + '.ep'.")
    corpus: str = Field(description="The corpus the episode was compiled from.")
    split: Split = Field(description="train, dev or test (held-out sites are test only).")
    family: str = Field(description="The static task family (configs/families.toml).")
    task_id: str = Field(description="The static task the episode was lifted from.")
    site_ids: list[str] = Field(description="The sites the episode touches.")
    interaction_mode: str = Field(
        description="The ordered obligations joined by '+', e.g. clarify_site+answer+revise_window+commit+evidence."
    )
    obligations: list[Obligation] = Field(description="The obligations in order, as a list.")
    initial_message: str = Field(description="Phase 0's prompt: the first user turn, withheld slot left out.")
    hidden_instruction: str = Field(description="The full request, never shown to the agent.")
    withheld: list[WithheldSlot] = Field(
        description="Slots left out of the initial message, with the simulator's fixed replies."
    )
    phases: list[Phase] = Field(
        description="1 + revisions; the last is the commitment. Each: prompt, gold, answer form "
        "(fields, units, codes, tolerances) and the tool calls that reach the gold."
    )
    follow_ups: list[FollowUp] = Field(description="Rationale and evidence questions after the last phase, with golds.")
    stop_reply: str = Field(description="The simulator's last turn, after the last follow-up.")
    nudge_reply: str = Field(description="The simulator's reply to a question that does not ask for the withheld slot.")
    idle_reply: str = Field(description="The simulator's reply to any question once nothing is withheld.")
    commitment_outcome: Outcome = Field(description="The gold commitment: answer, abstain or re_clarify.")
    evidence_stream_ids: list[str] = Field(description="The streams the answers must cite.")
    turn_budget: int = Field(description="The most agent turns the episode allows.")
    difficulty: dict[str, int] = Field(
        description="Difficulty proxies: counts of phases, tool calls, graph hops, "
        "aggregations, temporal normalizations and ambiguity candidates."
    )
    provenance_ref: str = Field(
        description="Key of this episode's provenance in provenance.jsonl beside the split files."
    )


class SlotConfig(Frozen):
    """Phrases that make a question ask for a slot's value (matched as whole words, case and punctuation ignored).

    A question asks for the slot when it holds one of the phrases ("which day", "what date", "when"): a word
    like "day" alone does not ask which day is meant."""

    phrases: list[str] = Field(min_length=1)
    reply: str | None = None


class FamilyLift(Frozen):
    """How one family's static tasks become episodes."""

    phase: Literal["lookup", "aggregate", "compare", "rank", "timestamp_value", "nearest_timestamp", "quality_decision"]
    withhold: Literal["site", "time", "none"]
    time_reply: str | None = None
    initial: list[str] = Field(min_length=1)
    revision: Literal["revise_window", "revise_target", "probe_nearest", "none"]
    revision_prompts: list[str] = []
    prefer: bool = False
    prefer_prompt: str | None = None
    commit_target: Literal["window", "timestamp"]
    follow_ups: list[Literal["rationale", "evidence"]]

    @model_validator(mode="after")
    def _enough_wording(self) -> FamilyLift:
        """Several phrasings per family (design/VALIDITY.md §6): 6 openings, 4 revisions."""
        if len(self.initial) < 6:
            raise ValueError(f"initial: {len(self.initial)} opening templates; write at least 6")
        if self.revision != "none" and len(self.revision_prompts) < 4:
            raise ValueError(f"revision_prompts: {len(self.revision_prompts)} templates; write at least 4")
        if self.withhold == "time" and not self.time_reply:
            raise ValueError("withhold = 'time' needs time_reply, the user's answer naming the time")
        if self.prefer and not self.prefer_prompt:
            raise ValueError("prefer = true needs prefer_prompt, the question that asks which window to trust")
        return self


class EpisodesConfig(Frozen):
    """The whole of configs/episodes.toml."""

    acceptable_offset_seconds: float = Field(gt=0)
    commit_within_days: int = Field(
        14, ge=0, description="The commitment's week (or reading) lies within this many days of what was discussed."
    )
    outcome_shares: dict[Outcome, float]
    mix_tolerance: float = Field(
        0.05,
        gt=0,
        lt=0.3,
        description="Every commitment outcome is within this of its declared share, in every split and in the corpus "
        "(within one row where one row is more than this of the rows): over-quota rows fill places only while it "
        "holds, the audit trims each split to it (fewer rows rather than a skewed mix) and its gate checks it.",
    )
    balanced_answers: dict[str, str] = Field(
        default_factory=dict,
        description="Obligation -> its code field, for obligations whose answer is one of a few codes (the "
        "preference's first/second, a quality band): like the commitment outcome, a verdict an agent could guess "
        "blind. No code is more than balance_max_share of an obligation's released golds in any split or in the "
        "corpus that has balance_min_rows of them (the audit trims to it, its gate refuses a release that breaks it).",
    )
    balance_max_share: float = Field(
        0.6,
        ge=0.5,
        le=1,
        description="The largest share one value of a blind-guessable verdict (a balanced answer's code, the "
        "commitment outcome) may have of a split's (or the corpus's) rows of that verdict.",
    )
    balance_min_rows: int = Field(
        8,
        ge=1,
        description="A split (or corpus) with fewer rows of a verdict is held to balance_max_share within one row: one "
        "row there moves a share by more than the bound allows.",
    )
    commit_week_cap: int = Field(
        2,
        ge=1,
        description="At most this many released commitments of one corpus share a calendar week "
        "(Monday to Sunday, UTC) and an outcome, so that no row's outcome can be remembered from other rows "
        "about the same week (design/VALIDITY.md section 3). A corpus of few weeks allows each week the outcome's "
        "share of its rows per week instead, when that is more: every week's mix then follows the declared shares.",
    )
    commit_stream_week_cap: int = Field(
        1,
        ge=1,
        description="In a group plan (one building split by rooms), at most this many released commitments ask about "
        "one stream's calendar week: a stream's week has one quality band, and two rows about it tell each other's "
        "outcome (30 days of 6 rooms: about 260 commitments on 150 stream-weeks, read off by the artifact probe).",
    )
    commit_days_below_weeks: int = Field(
        4,
        ge=1,
        description="A corpus of fewer calendar weeks than this caps its commitments per calendar day (UTC) instead "
        "of per week: in a short corpus one building-wide outage would otherwise give most of its non-answer rows, "
        "and their outcome is read off the weekday and hour (design/VALIDITY.md section 3).",
    )
    complete_share: float = Field(
        ge=0,
        lt=1,
        description="The share of the episodes of a family that withholds a slot in which the user says the slot up "
        "front (the withheld variant's opening followed by the reply the simulator would give) and nothing is "
        "withheld: drawn per episode by hash, so that neither the family nor the answer form tells whether to ask.",
    )
    commit_options: str
    commit_window_prompts: list[str] = Field(
        min_length=4, description="Commitment on a week: {phrase}, {week_start}, ending with {options}."
    )
    commit_timestamp_prompts: list[str] = Field(
        min_length=4, description="Commitment on a reading: {phrase}, {probe_iso}, ending with {options}."
    )
    stop_reply: str
    nudge: str
    after_release: str
    evidence_prompt: str
    rationale_prompt: str
    slots: dict[Literal["site", "time"], SlotConfig]
    families: dict[str, FamilyLift]


PolicyKind = Literal[
    "shortcut",
    "canned_clarification",
    "surface_guess",
    "week_memory",
    "clock",
    "week_complement",
    "grid_rules",
    "quality_blind",
    "majority_commitment",
]
# How each kind of policy is gated (design/VALIDITY.md section 4): a deterministic shortcut wins no released row (rows
# it wins that claim what it lacks are excluded); a guesser is no better than the majority share + margin over the
# released commitments; grid rules win at most a share of the released rows that need a nearest lookup; a policy that
# commits the train majority wins at most that outcome's declared share + majority_margin of the released rows.
GATES: dict[str, Literal["exclude", "accuracy", "share", "majority"]] = {
    "shortcut": "exclude",
    "canned_clarification": "exclude",
    "surface_guess": "accuracy",
    "week_memory": "accuracy",
    "clock": "accuracy",
    "week_complement": "accuracy",
    "grid_rules": "share",
    "quality_blind": "majority",
    "majority_commitment": "majority",
}


class Policy(Frozen):
    """One shortcut policy: a solver lacking one capability, or a cheap strategy standing in for it."""

    name: str
    lacks: str
    kind: PolicyKind = Field(
        "shortcut",
        description="shortcut: the template solver without `lacks`; canned_clarification: "
        "asks one question naming every slot kind; surface_guess / week_memory: commit by the majority "
        "outcome of rows with the same surface / week in the other splits, without looking quality up; clock: "
        "the majority outcome of train rows probed at the same local hour and weekday; week_complement: the outcome "
        "with the fewest rows of the same calendar week in the other splits; "
        "grid_rules: nearest readings by exact lookups on the rounded grid; quality_blind: does all the work, calls "
        "the quality tools as told, never reads them and commits the train majority outcome; majority_commitment: "
        "solves the phases, calls no quality tool at the commitment and commits the train majority outcome.",
    )
    description: str

    @property
    def gate(self) -> str:
        return GATES[self.kind]


class ArtifactProbe(Frozen):
    """The text-only probe (design/VALIDITY.md §3): how well the commitment outcome is predicted from what the agent
    sees."""

    folds: int = Field(5, ge=2, description="Cross-validation folds, grouped by task.")
    tree_depth: int = Field(6, ge=1, description="Depth of the shallow decision tree.")


class Guessers(Frozen):
    """How the guessers remember: both learn from the rows of the other splits (leave one split out)."""

    reach_weeks: int = Field(
        4,
        ge=0,
        description="week_memory: a week not remembered takes the nearest remembered week "
        "this close, else the majority outcome.",
    )
    min_support: int = Field(
        3,
        ge=1,
        description="surface_guess, clock: a surface (a local hour and weekday) seen fewer times backs off to a "
        "coarser one.",
    )


class Gates(Frozen):
    """The statistical release gates (design/VALIDITY.md sections 3-4)."""

    margin: float = Field(
        0.05, ge=0, description="The probe and the guessers pass at accuracy <= the majority share + margin."
    )
    standard_errors: float = Field(
        2.0,
        ge=0,
        description="The margin is at least this many standard errors of the majority share over the gated rows, "
        "sqrt(m (1 - m) / n): on a release of about a hundred rows, chance alone moves a probe's accuracy by more "
        "than 0.05 (docs/audit.md).",
    )
    min_rows: int = Field(
        60,
        ge=1,
        description="Below this many released commitments the probe and the guessers report "
        "insufficient_rows instead of passing or failing.",
    )
    grid_rule_max_share: float = Field(
        0.40,
        ge=0,
        le=1,
        description="Grid rules win at most this share of the released rows that need a nearest lookup.",
    )
    majority_margin: float = Field(
        0.05,
        ge=0,
        le=1,
        description="A policy committing the train majority outcome without reading quality (quality_blind, "
        "majority_commitment) wins at most that outcome's declared share + this of the released rows (one row "
        "more where one row is more than this).",
    )


class AuditConfig(Frozen):
    """The whole of configs/audit.toml: capabilities episodes declare, and the policies that test them."""

    artifact_probe: ArtifactProbe = ArtifactProbe()
    gates: Gates = Gates()
    guessers: Guessers = Guessers()
    capabilities: dict[str, list[str]] = Field(description="Capability -> obligations requiring it.")
    outcome_capabilities: dict[str, list[Outcome]] = Field(
        description="Capability -> commitment outcomes requiring it."
    )
    phase_capabilities: dict[str, list[str]] = Field(
        description="Capability -> phase types or commitment reasons requiring it."
    )
    policies: list[Policy] = Field(min_length=1)
