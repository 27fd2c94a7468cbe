"""An agent behind any OpenAI-compatible chat-completions endpoint with tool calling.

The telemetry tools are offered as functions with their registry schemas, beside three protocol
functions (ask_user, answer, plan) with the schemas of contracts/protocol.py. One function call a
turn is played; several are returned as a list (the runner records parallel_calls and plays the
first); arguments that are not JSON, or a reply without a function call, do not parse (parse_error).
Rate limits and server errors are retried with exponential backoff by the official `openai` client; a transport
failure that persists (5xx, refused, timeout, a body that is not a completion) is an InfraFailure: the episode ends
as infra_error, is left out of the scores, and `run` exits non-zero (its trace can be resumed).

The model's own failures are never infra_error: a reply cut at the reply cap (--max-tokens; finish_reason `length`),
a reply that is not a function call, and a model that never ends the episode (its per-episode budget of generated
tokens, --episode-tokens, spent: no further request is sent, every later turn is a parse_error naming the counts, and
the episode ends not_terminated at its turn budget) are parse_error and not_terminated with their token counts.
With --stream the reply is read as a stream and closed at the cap, whether or not the server honours max_tokens
(pipeline/runtime/openai_stream.py).

Providers differ (docs/runtime.md has a recipe for each): tool-call ids in any format (vLLM's chatcmpl-tool-...),
arguments given as a JSON object rather than a string, and tool calls without an id (one is given, and written back
into the conversation so that the model can reference it) are all taken.
"""

from __future__ import annotations

import ipaddress
import json
import os
import sys
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from contracts.agent_view import AgentObservation, ViewMessage
from contracts.answers import AnswerForm
from contracts.protocol import Answer, AskUser, Plan
from pipeline.core.canonical import loads_untrusted, not_unicode, printable
from pipeline.core.errors import AgentFailure, FatalAgentError, OpenAIAgentError
from pipeline.runtime.agents import InfraFailure, unparsed
from pipeline.runtime.openai_stream import read_stream
from pipeline.tools import registry

SYSTEM = (
    "You are an operations assistant answering questions about building and district-heating telemetry. "
    "You act through functions only, exactly one function call per turn: call a telemetry tool, ask_user when "
    "something you need (which site, which time) is missing, answer to give your answer to the current request "
    "with its fields as JSON, or plan. Timestamps are ISO 8601 with Z or an offset. A tool argument may reference "
    "an earlier result as $<tool_call_id>.field. The user will revise the request, ask whether a result can be "
    "reported (answer, abstain or re_clarify, with a reason), and ask which stream ids you used."
)
PROTOCOL = {
    "ask_user": ("Ask the user a question (for example which site or which time they mean).", AskUser),
    "answer": ("Answer the current request: a short text and the requested values as `fields`.", Answer),
    "plan": ("State what you will do next (no effect on the conversation).", Plan),
}


def _protocol_schema(model: type) -> dict:
    schema = model.model_json_schema()
    schema["properties"].pop("kind", None)
    schema.pop("title", None)
    return schema


def _answer_schema(form: AnswerForm) -> dict:
    """The answer function's parameters for the question now open: its answer form as `fields`, and a short text."""
    return {
        "type": "object",
        "properties": {
            "fields": {
                **form.json_schema(),
                "description": "The answer form of the current request: " + form.sentence(),
            },
            "text": {"type": "string", "description": "A short answer in words (not graded)."},
        },
        "required": ["fields"],
    }


def function_specs(form: AnswerForm | None = None) -> list[dict]:
    """Every function offered to the model: the telemetry tools, then ask_user, answer, plan. With the open
    question's answer form, `answer` takes exactly its fields (names, types, units, codes with their meanings)."""
    specs = [
        {"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.input_schema()}}
        for t in registry.TOOLS
    ]
    for name, (description, model) in PROTOCOL.items():
        parameters = _answer_schema(form) if name == "answer" and form is not None else _protocol_schema(model)
        specs.append(
            {"type": "function", "function": {"name": name, "description": description, "parameters": parameters}}
        )
    return specs


def replies(new: list[ViewMessage], pending: list[str]) -> list[dict]:
    """The chat messages (OpenAI's roles) that report the conversation's new turns to the model: the first pending
    tool call gets the tool's result (or the user's reply), any other one that it was not played, and the user's
    further words are user messages."""
    if not pending:
        return [{"role": "user", "content": m.text} for m in new if m.role == "user"]
    results = [
        json.dumps(m.result, ensure_ascii=False) if m.role == "tool" else m.text
        for m in new
        if m.role in ("tool", "user")
    ]
    messages = [
        {
            "role": "tool",
            "tool_call_id": call_id,
            "content": (results[0] if results else "ok") if index == 0 else "not executed: one function call per turn",
        }
        for index, call_id in enumerate(pending)
    ]
    return messages + [{"role": "user", "content": text} for text in results[1:]]


def call_action(name: str, arguments: Any, call_id: str) -> dict:
    """A model's function call as a protocol action: ask_user, answer and plan by name, any other name a tool call.
    Arguments are JSON text or an object; anything else does not parse."""
    if isinstance(arguments, str):
        try:
            arguments = loads_untrusted(arguments or "{}")
        except json.JSONDecodeError:
            return {"unparsed": arguments}
    if not isinstance(arguments, dict):
        return {"unparsed": arguments}
    if name in PROTOCOL:
        return {"kind": name, **arguments}
    return {"kind": "call_tool", "name": name, "arguments": arguments, "id": call_id}


def reply_output(actions: list[dict], text: str, usage: dict | None) -> Any:
    """One model reply as the runner takes it: its one action, a list of several (parallel_calls: the first is
    played), or its text when it made no call (parse_error); the turn's token usage rides on the first."""
    first, *rest = actions or [{"unparsed": text}]
    if usage:
        first = {**first, "usage": usage}
    return [first, *rest] if rest else first


# Seconds a request may take: a hosted endpoint answers within the first; a server on this machine (a loopback
# address) is likely a model on a CPU, where one reply of the cap's length at a few tokens a second, after the
# prompt's thousands of tokens, takes minutes.
TIMEOUT_S = 120.0
LOCAL_TIMEOUT_S = 600.0


def is_local(base_url: str) -> bool:
    """Whether the endpoint is on this machine (localhost or a loopback address)."""
    host = urlsplit(base_url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass
class OpenAISettings:
    base_url: str
    model: str
    api_key_env: str = "OPENAI_API_KEY"
    temperature: float | None = 0.0
    seed: int | None = None
    max_retries: int = 4
    timeout: float | None = None  # None: TIMEOUT_S, or LOCAL_TIMEOUT_S for a server on this machine
    max_tokens: int | None = 512  # the reply cap, sent as max_tokens (None: no cap sent)
    episode_tokens: int | None = 8192  # tokens the model may generate in one episode (None: no budget)
    stream: bool = False  # read replies as streams, cut at the cap by the agent itself
    progress: bool = False  # one line a request on stderr: tokens in and out, seconds, tokens a second

    @classmethod
    def resolve(
        cls, base_url: str | None = None, model: str | None = None, api_key_env: str | None = None, **options: Any
    ) -> OpenAISettings:
        """Flags first, then OPENAI_BASE_URL and OPENAI_MODEL, then defaults; a missing endpoint or model is an
        error."""
        base_url = base_url or os.environ.get("OPENAI_BASE_URL")
        model = model or os.environ.get("OPENAI_MODEL")
        if not base_url or not model:
            missing = " and ".join(
                n
                for n, v in (("--base-url (or OPENAI_BASE_URL)", base_url), ("--model (or OPENAI_MODEL)", model))
                if not v
            )
            raise OpenAIAgentError(f"the openai agent needs {missing}")
        given = {k: v for k, v in options.items() if v is not None}
        return cls(base_url=base_url, model=model, api_key_env=api_key_env or "OPENAI_API_KEY", **given)

    def request_timeout(self) -> float:
        if self.timeout is not None:
            return self.timeout
        return LOCAL_TIMEOUT_S if is_local(self.base_url) else TIMEOUT_S


def _usage(response: Any) -> dict | None:
    usage = getattr(response, "usage", None)
    if usage is None:
        return None
    counts = usage.model_dump(include={"prompt_tokens", "completion_tokens", "total_tokens"})
    return {k: v for k, v in counts.items() if isinstance(v, int)} or None


def unique_call_id(given: str | None, seen: set[str], turn: int, index: int) -> str:
    """A tool call's id unique in the conversation: the model's own, or, when it gave none or one given before (some
    servers number per reply), a fresh one that is said back in the conversation. `seen` takes it."""
    call_id = given if given and given not in seen else f"call_{turn}_{index}"
    while call_id in seen:
        call_id += "_"
    seen.add(call_id)
    return call_id


class OpenAIAgent:
    """The model behind an endpoint, as an agent of the documented protocol (docs/agents.md): it is given the agent
    view only."""

    name = "openai"

    def __init__(self, settings: OpenAISettings) -> None:
        import openai

        key = (
            os.environ.get(settings.api_key_env) or "no-key"
        )  # keyless local servers (vLLM, Ollama, llama.cpp) ignore it
        self.settings = settings
        self.client = openai.OpenAI(
            base_url=settings.base_url,
            api_key=key,
            max_retries=settings.max_retries,
            timeout=settings.request_timeout(),
        )

    def start(self, episode: Any = None) -> None:  # an EpisodeStart: a new conversation begins
        self.messages: list[dict] = [{"role": "system", "content": SYSTEM}]
        self.seen = 0
        self.pending: list[str] = []
        self.turn = 0
        self.ids: set[str] = set()
        self.spent = {"prompt_tokens": 0, "completion_tokens": 0}  # the episode's tokens so far

    def _absorb(self, observation: AgentObservation) -> None:
        """New conversation turns become chat messages; every pending tool call gets its response."""
        new = observation.messages[self.seen :]
        self.seen = len(observation.messages)
        self.messages += replies(new, self.pending)
        self.pending = []

    def act(self, observation: AgentObservation) -> Any:
        self._absorb(observation)
        self.turn += 1
        budget = self.settings.episode_tokens
        if budget is not None and self.spent["completion_tokens"] >= budget:
            # the model never ended the episode: no further request; the turn budget ends it (not_terminated)
            return unparsed("", f"the episode's budget of {budget} generated tokens is spent ({self._counts()})")
        started = time.perf_counter()
        usage, message, finish = self._complete(observation)
        self._account(usage, time.perf_counter() - started)
        calls = self._named_calls(message)
        said = message.model_dump(exclude_none=True, include={"role", "content", "tool_calls"})
        # content goes back as a string, empty beside tool calls (the API takes "" or null there): llama-cpp-python's
        # server refuses null (its request model wants a string) and its chatml-function-calling template (jinja2
        # StrictUndefined) fails on a message without the key; either fails the next request with a 500
        if said.get("content") is None:
            said["content"] = ""
        problem = not_unicode(said)
        if problem is not None:  # the model's own output error, checked where it enters; said back escaped
            said = printable(said)
        self.messages.append(said)
        self.pending = [call["id"] for call in said.get("tool_calls") or []]
        if problem is not None:
            return reply_output([unparsed(said, f"the model's reply: {problem}")], "", usage)
        if finish == "length":  # cut at the cap: whatever it holds is unfinished (a call's arguments cut mid-way)
            why = f"the reply was cut at the cap of {self.settings.max_tokens} tokens (finish_reason length)"
            return reply_output([unparsed(said, f"{why}; {self._counts()}")], "", usage)
        return reply_output(
            [call_action(c.function.name, c.function.arguments, c.id) for c in calls], message.content or "", usage
        )

    def _counts(self) -> str:
        return f"this episode: {self.spent['prompt_tokens']} tokens in, {self.spent['completion_tokens']} out"

    def _account(self, usage: dict | None, seconds: float) -> None:
        """The episode's token counts, and the request on stderr with --progress (a local model is slow: its rate)."""
        usage = usage or {}
        for key in self.spent:
            self.spent[key] += usage.get(key, 0)
        if self.settings.progress:
            out = usage.get("completion_tokens", 0)
            print(
                f"{self.settings.model} turn {self.turn}: {usage.get('prompt_tokens', 0)} tokens in, {out} out in "
                f"{seconds:.1f} s ({out / max(seconds, 1e-9):.1f} tokens/s out); {self._counts()}",
                file=sys.stderr,
                flush=True,
            )

    def _complete(self, observation: AgentObservation) -> tuple[dict | None, Any, str | None]:
        """The endpoint's reply to the conversation: its token usage, its message and why it ended (finish_reason);
        failures raised as the runner's error kinds."""
        import openai

        options: dict[str, Any] = {
            "model": self.settings.model,
            "messages": self.messages,
            "tools": function_specs(observation.answer_form),
            # OpenAI's default when tools are given, said outright: llama-cpp-python's chatml-function-calling shows
            # the model no function at all without it
            "tool_choice": "auto",
        }
        if self.settings.max_tokens is not None:
            options["max_tokens"] = self.settings.max_tokens
        if self.settings.temperature is not None:
            options["temperature"] = self.settings.temperature
        if self.settings.seed is not None:
            options["seed"] = self.settings.seed
        try:
            if self.settings.stream:
                stream = self.client.chat.completions.create(
                    **options, stream=True, stream_options={"include_usage": True}
                )
                reply = read_stream(stream, self.settings.max_tokens)
                return reply.usage_counts(), reply.message(), reply.finish_reason
            response = self.client.chat.completions.create(**options)
            choice = response.choices[0]
            return _usage(response), choice.message, getattr(choice, "finish_reason", None)
        except (openai.APIConnectionError, openai.InternalServerError, openai.RateLimitError) as exc:
            # after the client's retries: the endpoint failed, not the model (connection, timeout, 5xx, rate limit)
            raise InfraFailure(f"{type(exc).__name__}: {str(exc)[:300]} ({self.settings.base_url})") from exc
        except (openai.AuthenticationError, openai.PermissionDeniedError, openai.NotFoundError) as exc:
            raise FatalAgentError(
                f"{self.settings.base_url} refused the request ({type(exc).__name__}: {str(exc)[:200]}): "
                "check --api-key-env, --model and --base-url"
            ) from exc
        except openai.APIStatusError as exc:
            if exc.status_code >= 500:
                raise InfraFailure(f"{type(exc).__name__}: {str(exc)[:300]} ({self.settings.base_url})") from exc
            # 400, 413, 422, ...: the request the model's conversation made was refused (e.g. its context overflowed)
            raise AgentFailure(f"{type(exc).__name__} {exc.status_code}: {str(exc)[:300]}") from exc
        except openai.APIError as exc:  # a reply that is not a completion (APIResponseValidationError, ...)
            raise InfraFailure(f"{type(exc).__name__}: {str(exc)[:300]} ({self.settings.base_url})") from exc
        except (AttributeError, IndexError, TypeError, ValueError) as exc:  # a 200 whose body is not a completion
            raise InfraFailure(
                f"the endpoint's reply is not a chat completion ({type(exc).__name__}: {str(exc)[:200]})"
            ) from exc

    def _named_calls(self, message: Any) -> list[Any]:
        """The message's tool calls, each with an id unique in the conversation and its arguments as JSON text."""
        calls = list(message.tool_calls or [])
        for index, call in enumerate(calls):
            call.id = unique_call_id(getattr(call, "id", None), self.ids, self.turn, index)
            if isinstance(call.function.arguments, dict):  # some give an object: taken, and said back as JSON text
                call.function.arguments = json.dumps(call.function.arguments)
        return calls
