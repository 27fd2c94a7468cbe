"""The agent view: exactly what an agent receives at each turn, and nothing else.

An agent sees the conversation so far (the user's messages, its own actions, tool results) and the answer form
of the question now open. It never sees golds, hidden instructions or the episode's structure. Every agent,
built in or brought by a user, is given this view; `telemetry-bench inspect episode ID --agent-view` prints it.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from contracts.answers import AnswerForm
from contracts.base import Frozen


class ViewMessage(Frozen):
    """One message of the conversation as the agent sees it."""

    role: Literal["user", "agent", "tool"]
    text: str | None = Field(
        None, description="user: the words said (a question's words end with its answer form's sentence)."
    )
    answer_form: AnswerForm | None = Field(None, description="user: the form of the question this message opens.")
    action: dict[str, Any] | None = Field(None, description="agent: its own action as played.")
    call_id: str | None = Field(None, description="tool: the id a later argument may reference as $<call_id>.field.")
    result: dict[str, Any] | None = Field(None, description="tool: the tool's result (or its error).")


class AgentObservation(Frozen):
    """What an agent receives before one turn."""

    episode_id: str
    turn: int = Field(description="0-based turn number.")
    budget: int = Field(description="How many turns the episode allows.")
    messages: list[ViewMessage] = Field(description="The whole conversation so far, oldest first.")
    answer_form: AnswerForm | None = Field(
        description="The form of the question now open (None once all are answered)."
    )
