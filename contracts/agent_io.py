"""The JSON-lines protocol of `run --agent-cmd`: an agent in any language, in its own process.

The runner writes one JSON object per line to the agent's stdin and reads one line back for every observation:

    runner -> agent   {"type": "episode_start", ...}   once per episode; no reply expected
    runner -> agent   {"type": "observation", ...}     every turn: the agent view (contracts.agent_view)
    agent  -> runner  {"kind": "call_tool", ...}        one action of contracts.protocol per observation
    runner -> agent   {"type": "episode_end", ...}     once per episode; no reply expected

Every line is UTF-8 JSON. An agent's line longer than MAX_ACTION_LINE_BYTES, or one that is not UTF-8 or not Unicode
text (a lone surrogate such as "\\ud800"), is the agent's own output error (parse_error): the runner keeps no more of it
than the limit and play goes on.

The agent view holds no golds. Its JSON Schemas are in contracts/schemas/ (agent_input, agent_output), so that an agent
can check itself; a message of an unknown type should be ignored (later protocol versions may add some).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from contracts.agent_view import AgentObservation
from contracts.base import Frozen

PROTOCOL_VERSION = "telemetry-bench-agent/1"
MAX_ACTION_LINE_BYTES = 1 << 20  # the longest action line an agent may write (1 MiB, without its newline)


class ToolSpec(Frozen):
    """One telemetry tool as offered to agents: its name, description and argument schema."""

    name: str
    description: str
    input_schema: dict[str, Any]


class EpisodeStart(Frozen):
    """Before the first observation of an episode. No reply."""

    type: Literal["episode_start"] = "episode_start"
    protocol: str = Field(
        PROTOCOL_VERSION, description="The protocol version; an agent may refuse one it does not know."
    )
    episode_id: str
    corpus: str
    split: str
    budget: int = Field(description="How many turns the episode allows.")
    tools: list[ToolSpec] = Field(
        description="The telemetry tools the agent may call (call_tool with name and arguments)."
    )
    actions: list[str] = Field(
        description="The kinds of action the agent may return (ask_user, call_tool, answer, plan)."
    )


class ObservationMessage(AgentObservation):
    """Before every turn: what the agent sees. The reply is one action as one JSON line."""

    type: Literal["observation"] = "observation"


class EpisodeFinish(Frozen):
    """After the last turn of an episode (the user said STOP, or the budget ran out). No reply."""

    type: Literal["episode_end"] = "episode_end"
    episode_id: str
    turns: int
    stopped: bool = Field(description="Whether the user ended the conversation (False: the turn budget ran out).")


AgentInput = Annotated[EpisodeStart | ObservationMessage | EpisodeFinish, Field(discriminator="type")]
