"""llama-cpp-python's OpenAI-compatible server with two mends for tool calling (`make model-smoke`; the extra
local-model installs llama-cpp-python at the version constraints.txt pins, whose internals these mends name).

    python -m pipeline.bench.llama_server --reply-cap 256 --model M.gguf --chat_format chatml-function-calling ...

Every argument after --reply-cap N goes to `python -m llama_cpp.server` as it is.

1. Its chatml-function-calling format renders the conversation through a Jinja environment that escapes HTML, so
   the model reads "I&#39;m" for "I'm" and &#34; for every quote of a tool's JSON result, and its next reply echoes
   the escapes, escaped again a turn later ("I&amp;#39;m"). A chat prompt is not HTML: escaping is turned off.
2. With tool_choice auto it generates every piece (the choice between a message and a function, each function's
   arguments) with max_tokens None, i.e. until the context ends: a model that does not stop runs for minutes per
   request (7,964 tokens at 30 tokens/s for gemma3-270m). A completion asked with no cap gets the reply cap instead;
   one asked with a cap keeps it.
3. llama.cpp built for this CPU (GGML_NATIVE) picks its AMX kernels for the weights where the CPU says it has AMX,
   and they crash (SIGSEGV in ggml_backend_amx_mul_mat) where the kernel gives the process no AMX state, as here:
   the extra buffer types (weight repacking for AMX) are turned off; the plain CPU kernels run.
4. Its chatml-function-calling template renders system, user and assistant messages and nothing of a `tool` message
   but "<|im_start|>tool": the model never reads a tool's result (nor its end of turn). The template gets the
   branch it lacks, a tool message's content and its end, in ChatML as the other roles are.
"""

from __future__ import annotations

import sys
import types
from typing import Any


def _unescaped_jinja(jinja2: types.ModuleType) -> types.ModuleType:
    """jinja2 as llama_chat_format sees it, but whose select_autoescape escapes no template."""
    shim = types.ModuleType("jinja2_unescaped")
    shim.__dict__.update({k: v for k, v in vars(jinja2).items() if not k.startswith("__")})
    shim.select_autoescape = lambda *args, **kwargs: lambda template_name=None: False
    return shim


# the end of chatml-function-calling's message loop, and the same with a branch for tool results before it
LOOP_END = "{% endif %}{% endfor %}{% if add_generation_prompt %}"
TOOL_BRANCH = "{% if message.role == 'tool' %}{{ message.content }}<|im_end|>\n{% endif %}"


def with_tool_results(environment: type) -> type:
    """The sandboxed Jinja environment llama_chat_format renders with, whose chatml-function-calling template (told
    by its "functions.<function_name>:" instructions) renders tool messages."""

    class Mended(environment):
        def from_string(self, source: Any, *args: Any, **kwargs: Any) -> Any:
            if isinstance(source, str) and "functions.<function_name>:" in source and LOOP_END in source:
                source = source.replace(LOOP_END, LOOP_END.replace("{% endfor %}", TOOL_BRANCH + "{% endfor %}"), 1)
            return super().from_string(source, *args, **kwargs)

    return Mended


def capped(create_completion: Any, cap: int) -> Any:
    """Llama.create_completion with `cap` wherever it is asked for no cap (None, or 0 and below, which llama.cpp
    takes as 'until the context ends')."""

    def create(self: Any, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("max_tokens") is None or kwargs["max_tokens"] <= 0:
            kwargs["max_tokens"] = cap
        return create_completion(self, *args, **kwargs)

    return create


def without_extra_buffers(default_params: Any) -> Any:
    """llama_model_default_params with use_extra_bufts off (no AMX repacking)."""

    def params() -> Any:
        found = default_params()
        found.use_extra_bufts = False
        return found

    return params


def main(argv: list[str]) -> None:
    if len(argv) < 2 or argv[0] != "--reply-cap" or not argv[1].isdigit() or int(argv[1]) < 1:
        sys.exit("usage: python -m pipeline.bench.llama_server --reply-cap N [llama_cpp.server arguments]")
    import jinja2
    import llama_cpp
    from llama_cpp import llama_chat_format
    from llama_cpp import llama_cpp as bindings
    from llama_cpp.server.__main__ import main as serve

    llama_chat_format.jinja2 = _unescaped_jinja(jinja2)
    llama_chat_format.ImmutableSandboxedEnvironment = with_tool_results(llama_chat_format.ImmutableSandboxedEnvironment)
    bindings.llama_model_default_params = without_extra_buffers(bindings.llama_model_default_params)
    llama_cpp.Llama.create_completion = capped(llama_cpp.Llama.create_completion, int(argv[1]))
    sys.argv = ["llama_cpp.server", *argv[2:]]
    serve()


if __name__ == "__main__":
    main(sys.argv[1:])
