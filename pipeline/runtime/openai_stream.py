"""A streamed chat completion read chunk by chunk and cut at the reply cap (the openai agent's --stream).

A server that honours max_tokens stops by itself; one that does not (a runaway model, a server whose tool-calling
mode drops the cap, as llama-cpp-python's chatml-function-calling does with tool_choice auto) would stream until the
context ends, and a plain request would wait for it until the timeout (infra_error). Read as a stream, the reply
is closed at the cap: the model's own failure (a reply cut at the cap), recorded with its token counts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class _Call:
    id: str | None = None
    name: str = ""
    arguments: str = ""


@dataclass
class StreamedReply:
    """What a streamed reply said: its text, its tool calls (id, name, arguments as JSON text), why it ended
    (`length` when cut at the cap), its usage (the server's, else the chunks counted as completion tokens)."""

    content: str = ""
    calls: dict[int, _Call] = field(default_factory=dict)
    finish_reason: str | None = None
    chunks: int = 0
    usage: Any = None

    def message(self) -> Any:
        """The reply as the client's ChatCompletionMessage, as a request without streaming returns it."""
        from openai.types.chat import ChatCompletionMessage

        calls = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for _, c in sorted(self.calls.items())
        ]
        return ChatCompletionMessage.model_validate(
            {"role": "assistant", "content": self.content or None, **({"tool_calls": calls} if calls else {})}
        )

    def usage_counts(self) -> dict[str, int]:
        """Token counts: the server's when it sent them (stream_options include_usage), else the chunks read, one
        token each (servers send a token a chunk), as completion tokens."""
        if self.usage is not None:
            counts = self.usage.model_dump(include={"prompt_tokens", "completion_tokens", "total_tokens"})
            found = {k: v for k, v in counts.items() if isinstance(v, int)}
            if found:
                return found
        return {"completion_tokens": self.chunks}


def read_stream(stream: Any, cap: int | None) -> StreamedReply:
    """Every chunk of the stream until it ends or `cap` chunks carrying text or tool-call pieces were read; then the
    stream is closed (the server stops generating when the connection goes) and finish_reason is `length`."""
    reply = StreamedReply()
    try:
        for chunk in stream:
            if getattr(chunk, "usage", None) is not None:
                reply.usage = chunk.usage
            for choice in chunk.choices or []:
                delta = choice.delta
                carried = False
                if delta is not None and delta.content:
                    reply.content += delta.content
                    carried = True
                for piece in (delta.tool_calls if delta is not None else None) or []:
                    call = reply.calls.setdefault(piece.index, _Call())
                    call.id = call.id or piece.id
                    if piece.function is not None:
                        call.name += piece.function.name or ""
                        call.arguments += piece.function.arguments or ""
                    carried = True
                reply.chunks += carried
                if choice.finish_reason:
                    reply.finish_reason = choice.finish_reason
            if cap is not None and reply.chunks >= cap and reply.finish_reason is None:
                reply.finish_reason = "length"
                break
    finally:
        stream.close()
    return reply
