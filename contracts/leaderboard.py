"""The leaderboard file (`telemetry-bench leaderboard TRACE... --out results.json`): one row per agent identity,
corpus and split, ranked only against rows scored on the same episode set."""

from __future__ import annotations

from pydantic import Field

from contracts.base import Frozen


class Identity(Frozen):
    """Who played: agent kind, model, and the digest of the settings that change behaviour."""

    agent: str
    model: str | None
    digest: str = Field(description="xxh3-128 of the canonical JSON of the agent kind and its behaviour settings.")
    label: str = Field(description="What to show: kind, model and the digest's first 8 hex digits.")


class Interval(Frozen):
    """A 95% percentile bootstrap interval of the accomplished rate over episodes."""

    low: float
    high: float
    resamples: int
    seed: int


class Usage(Frozen):
    tokens_in: int
    tokens_out: int
    turns_with_usage: int
    cost_usd: float | None = Field(None, description="Set when the price table names the model.")


class LeaderboardRow(Frozen):
    identity: Identity
    corpus: str
    split: str
    episodes_digest: str = Field(description="xxh3-128 of the episode file the traces were scored against.")
    release_digest: str | None = Field(
        None, description="The release the traces were played on (their headers' release_digest); None: unbound."
    )
    rank: int | None = Field(
        description="1 = best accomplished rate among the complete rows of the same corpus, split and episodes "
        "digest (ties share a rank); None for a partial row, which is never ranked."
    )
    partial: bool
    episodes: int = Field(description="Distinct episodes played.")
    episodes_in_split: int
    least_covered: int = Field(description="Episodes of the run that covers fewest (partial when < episodes_in_split).")
    runs: int
    accomplished_rate: float
    interval: Interval
    balanced_commitment_accuracy: float | None = Field(
        None,
        description="The mean of commitment_accuracy over the gold outcomes it holds: an agent that always answers "
        "gets 1/3 when all three outcomes occur, whatever their mix. None when no scored episode has a commitment.",
    )
    commitment_accuracy: dict[str, float] = Field(
        default={},
        description="Per gold commitment outcome present (answer, abstain, re_clarify): the share of its runs whose "
        "commitment decision graded right.",
    )
    commitment_runs: dict[str, int] = Field(
        default={}, description="Per gold commitment outcome present: its scored runs."
    )
    pass_k: dict[str, float] = Field(description="pass^k over the repeated runs, when k > 1 (e.g. {'pass^3': 0.8}).")
    parts: dict[str, float] = Field(description="final, evidence, phase, temporal, task and protocol rates.")
    per_family: dict[str, float]
    failure_modes: dict[str, int] = Field(description="Protocol issues and answer-field rejection reasons, counted.")
    usage: Usage
    per_episode: dict[str, float] = Field(description="Mean turns and tool calls per scored episode run.")
    traces: list[str] = Field(description="The trace files' names (not their paths).")


class RefusedTrace(Frozen):
    trace: str
    reason: str


class Leaderboard(Frozen):
    """results.json."""

    format: str = Field("telemetry-bench leaderboard 1", description="The file's format and version.")
    rows: list[LeaderboardRow]
    refused: list[RefusedTrace] = Field(description="Traces left out of the board, each with its reason.")
    warnings: list[str] = Field(
        default=[],
        description="Traces bound to no release, played side by side on different releases, or on another release "
        "than the project's build made (pipeline/harness/binding.py).",
    )
