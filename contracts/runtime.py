"""Traces and scores: what a run records and what the scorer makes of it."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from contracts.answers import Rejection
from contracts.base import Frozen
from contracts.corpus import CorpusName
from contracts.episodes import Outcome
from contracts.protocol import ACTION
from contracts.tasks import Split

ProtocolIssue = Literal[
    "premature_tool",
    "unnecessary_clarification",
    "redundant_clarification",
    "off_target_clarification",
    "missing_clarification",
    "missing_phase_answer",
    "missing_rationale",
    "missing_evidence",
    "empty_turn",
    "parse_error",
    "tool_error",
    "not_terminated",
    "parallel_calls",
    "agent_error",
    "infra_error",
]


class TraceHeader(Frozen):
    """First line of a trace file."""

    type: Literal["header"] = "header"
    corpus: CorpusName = Field(description="The corpus played: a name (it names a folder), never a path.")
    split: Split
    episode_set: Literal["episodes", "audit", "release"] = Field(
        description="Which episode file was played (the episodes or audit stage's, or a release folder's)."
    )
    episode_set_hash: str = Field(description="xxh3-128 of that file's bytes; scoring checks it.")
    release_digest: str | None = Field(
        None,
        pattern=r"^[0-9a-f]{64}$",
        description="The release played: the content digest (sha256, as `build` prints it and the card states it) of "
        "the release folder, or of the project's built release when its episodes and store were played; None when "
        "the play is bound to no release (a build without one, or a trace written before traces recorded it).",
    )
    agent: str
    repeat: int = Field(ge=1)
    settings: dict[str, Any]
    versions: dict[str, str]


class TurnRecord(Frozen):
    """One agent turn: the action, what came back, and issues the runner saw."""

    type: Literal["turn"] = "turn"
    episode_id: str
    run: int = Field(ge=0)
    player: str | None = Field(None, description="Which shortcut policy played (controller runs only).")
    turn: int = Field(ge=0)
    action: dict[str, Any] | None = Field(
        description="The action as played, one of the protocol's (None when the agent's output did not parse)."
    )
    raw: Any = Field(None, description="The agent's raw output when it did not parse or held several actions.")
    call_id: str | None = None
    tool_result: dict[str, Any] | None = None
    reply: str | None = Field(None, description="The simulated user's reply, if any.")
    event: str | None = None
    issues: list[ProtocolIssue] = []
    elapsed_ms: float = Field(0.0, description="Wall time of the agent's turn (not used by scoring).")
    usage: dict[str, int] | None = Field(None, description="Token usage when the agent reports it.")

    @field_validator("action")
    @classmethod
    def _an_action(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        """A recorded action is one the protocol allows, so that whoever reads a trace may rely on its fields."""
        if value is not None:
            ACTION.validate_python(value)
        return value

    @model_validator(mode="after")
    def _a_call_has_its_id_and_result(self) -> TurnRecord:
        """The runner names every tool call and records what it returned: later references and scoring read both."""
        if (self.action or {}).get("kind") == "call_tool" and (self.call_id is None or self.tool_result is None):
            raise ValueError("a call_tool turn has its call_id and tool_result (the runner records both)")
        return self


class EpisodeEnd(Frozen):
    type: Literal["end"] = "end"
    episode_id: str
    run: int = Field(ge=0)
    player: str | None = None
    turns: int = Field(ge=0)
    stopped: bool
    infra_error: str | None = Field(
        None,
        description="Set when what the agent stands on failed (a model endpoint after "
        "retries): the episode run is left out of the scores and counted apart; `run --resume` plays it again.",
    )


class EpisodeScore(Frozen):
    """Scores of one run of one episode; accomplished = task and protocol."""

    episode_id: str
    run: int
    family: str
    split: str
    interaction_mode: str
    final: bool
    evidence: bool
    phase: bool
    temporal: bool
    task: bool
    protocol: bool
    accomplished: bool
    phase_results: list[bool]
    issues: list[ProtocolIssue]
    rejections: list[Rejection] = Field(default=[], description="Every rejected field of every answer given, with why.")
    commitment_outcome: Outcome | None = Field(
        None,
        description="The episode's gold commitment decision (answer, abstain or re_clarify); None for an episode "
        "without a commitment phase (and in scores saved before it was recorded).",
    )
    commitment_correct: bool | None = Field(
        None,
        description="Whether the `decision` field of the agent's commitment-phase answer graded right (an "
        "unanswered commitment is wrong); None when commitment_outcome is.",
    )


class ModelPrice(Frozen):
    """What a model's tokens cost, in US dollars per million."""

    # finite: TOML writes `inf` and `nan`, and an infinite price would make every cost infinite (make fuzz)
    input: float = Field(ge=0, allow_inf_nan=False, description="US dollars per million tokens in (prompt).")
    output: float = Field(ge=0, allow_inf_nan=False, description="US dollars per million tokens out (completion).")


class PriceTable(Frozen):
    """`score --prices FILE` (TOML): `[models."<model>"]` with `input` and `output` prices per million tokens."""

    models: dict[str, ModelPrice] = Field(description="Model name as the trace header gives it -> its prices.")
