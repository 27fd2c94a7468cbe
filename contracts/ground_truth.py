"""Ground-truth trajectories (the seed's Appendix A format): what `export ground-truth` writes, `validate-gt` checks
and `evaluate` compares a trace with. Anyone's trajectories may carry more fields than these (ours add episode_id,
family, split...), so unknown fields are kept, not refused; the published schema is generated from these models."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class Open(BaseModel):
    """Immutable, strict on the types it names (5 is not "5"), and open to fields of others' making."""

    model_config = ConfigDict(frozen=True, extra="allow", strict=True)


class PlanningStep(Open):
    """One line of the plan: which agent does what."""

    agent: str
    instruction: str


class DeterministicFlags(Open):
    """Which parts of a step are the same on every run."""

    name: bool = Field(None, description="The step's name.")
    action: bool = Field(None, description="The tool or action it takes.")
    arguments: bool = Field(None, description="Its arguments.")
    outputs: bool = Field(None, description="What it outputs.")


class ExecutionStep(Open):
    """One action: a tool call of an agent (`@step.field` refers to an earlier step's output), or Finish."""

    name: str = Field(description="Unique within the trajectory; links and references name steps by it.")
    action: str = Field(description="The tool called, or 'Finish' for the final answer.")
    agent: str
    arguments: dict[str, Any] | str = Field(None, description="A JSON object (or the seed's free text).")
    outputs: list[Any] = Field(None, description="The variables the step produces.")
    deterministic: DeterministicFlags = Field(None, description="Which parts are the same on every run.")


class ExecutionLink(Open):
    """An edge of the execution DAG: `target` uses what `source` produced."""

    source: str
    target: str


class Trajectory(Open):
    """One scenario's ground truth: its plan, its execution steps and their DAG, and the final output."""

    model_config = ConfigDict(json_schema_extra={"$schema": "http://json-schema.org/draft-07/schema#"})

    id: int
    uuid: str = Field(None, json_schema_extra={"format": "uuid"})
    text: str = Field(description="The task as asked.")
    type: str = Field(description="The agent (or server) that plays it, or 'multiagent'.")
    category: str
    deterministic: bool
    characteristic_form: str = Field(description="What a correct final answer looks like.")
    planning_steps: list[PlanningStep]
    execution_steps: list[ExecutionStep]
    execution_links: list[ExecutionLink]
    final_out: dict[str, Any] | None = None
    final_out_description: list[str] = Field(None, description="The final output's parts in words.")
