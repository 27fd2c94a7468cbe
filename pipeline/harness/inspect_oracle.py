"""`--model telemetry_bench/oracle`: an inspect model that plays each sample's gold path, as `--agent oracle` does in
`telemetry-bench run`. It needs no network, no key and no tokenizer (inspect's own `mockllm/model` downloads
tiktoken's o200k_base to count tokens, and offline its task is interrupted while `inspect eval` exits 0), so the
inspect recipes of docs/inspect.md run offline and show the task, the log and `write_trace` end to end: the oracle
scores 1.0.

Like `--agent oracle`, it alone is given the episode: the solver (pipeline/harness/inspect_task.py) names the episode
in play under the sample's uuid while it plays, and this model reads it there; any other model sees only messages.
"""

from __future__ import annotations

from typing import Any

from inspect_ai.model import ChatMessage, GenerateConfig, ModelAPI, ModelOutput, ModelUsage
from inspect_ai.solver._task_state import sample_state
from inspect_ai.tool import ToolChoice, ToolInfo

from contracts.episodes import Episode
from pipeline.core.errors import RunError
from pipeline.runtime.gold_path import gold_actions

PLAYING: dict[str, Episode] = {}  # sample uuid -> the episode the solver is playing for it (this process's samples)
NO_TOKENS = ModelUsage(input_tokens=0, output_tokens=0, total_tokens=0)  # the oracle reads nothing and writes nothing


def gold_output(action: dict, step: int, model: str) -> ModelOutput:
    """One gold action as the tool call a model would make: ask_user, answer and plan by their name, a telemetry
    tool by its own (with the gold call's id, so that the gold path's references hold)."""
    arguments = dict(action)
    kind = arguments.pop("kind")
    name, call_id = kind, f"call{step}"
    if kind == "call_tool":
        name, call_id = arguments["name"], arguments["id"] or call_id
        arguments = arguments["arguments"]
    return ModelOutput.for_tool_call(model, name, arguments, tool_call_id=call_id)


class OracleAPI(ModelAPI):
    """The gold path of the sample in play, one action per reply (the step is the count of the model's replies so
    far); past its end, a plan (the episode is over by then: the gold path stops the user)."""

    def __init__(self, model_name: str, base_url: str | None = None, api_key: str | None = None, **kwargs: Any):
        if model_name != "oracle":
            raise RunError(
                f"telemetry_bench/{model_name}: no such model; the one offline model is telemetry_bench/oracle"
            )
        super().__init__(model_name=model_name, base_url=base_url, api_key=api_key, config=kwargs.get("config"))

    async def generate(
        self, input: list[ChatMessage], tools: list[ToolInfo], tool_choice: ToolChoice, config: GenerateConfig
    ) -> ModelOutput:
        state = sample_state()
        episode = PLAYING.get(state.uuid) if state is not None else None
        if episode is None:
            raise RunError(
                "telemetry_bench/oracle plays the tasks telemetry_bench/<corpus> and telemetry_bench/release only"
            )
        gold = [a.model_dump(mode="json") for a in gold_actions(episode)]
        step = sum(1 for message in input if message.role == "assistant")
        action = gold[step] if step < len(gold) else {"kind": "plan", "text": "the gold path is played"}
        output = gold_output(action, step, "telemetry_bench/oracle")
        output.usage = NO_TOKENS
        return output
