"""The agent protocol: one action per turn (ask the user, call one tool, answer a phase, or plan)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, TypeAdapter

from contracts.base import Frozen


class AskUser(Frozen):
    """A question to the user (clarification)."""

    kind: Literal["ask_user"] = "ask_user"
    text: str


class CallTool(Frozen):
    """One tool call; `id` names its output for later references ($id.field)."""

    kind: Literal["call_tool"] = "call_tool"
    name: str
    arguments: dict[str, Any]
    id: str | None = Field(None, description="Call id for references; the runner assigns c1, c2, ... when absent.")


class Answer(Frozen):
    """An answer to the current phase or follow-up: free text plus the required fields as JSON."""

    kind: Literal["answer"] = "answer"
    text: str = ""
    fields: dict[str, Any] = Field(default={}, description="The phase's required fields, e.g. {'mean': 12.3}.")


class Plan(Frozen):
    """An optional statement of intent; costs a turn, changes nothing."""

    kind: Literal["plan"] = "plan"
    text: str


Action = Annotated[AskUser | CallTool | Answer | Plan, Field(discriminator="kind")]
ACTION = TypeAdapter(Action)  # validates any of them by its kind (the runner's parser, a trace's recorded actions)
