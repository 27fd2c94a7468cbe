"""`make model-smoke` without a model: the server is stopped whatever ends its block, a model file is assembled from
its parts and checked, the figures' row replaces the model's own in docs/benchmarks.md, the config is the one shipped.
(The real model runs only under `make model-smoke`: it needs the extra local-model and minutes.)"""

from __future__ import annotations

import hashlib
import sys

import pytest

from contracts.local_models import LocalModel
from pipeline.bench import model_smoke
from pipeline.bench.llama_server import capped
from pipeline.core.config import load_local_models
from pipeline.core.errors import RunError
from pipeline.core.workspace import Workspace
from tests.helpers import REPO


class StubServer(model_smoke.Server):
    """Python's own HTTP server in the model server's place."""

    def command(self) -> list[str]:
        return [sys.executable, "-m", "http.server", str(self.port), "--bind", "127.0.0.1", "-d", str(self.log.parent)]


def test_the_server_stops_when_the_play_fails(tmp_path):
    smoke = load_local_models(Workspace.from_root(REPO)).smoke
    server = StubServer("m", tmp_path / "m.gguf", smoke, tmp_path / "server.log")
    with pytest.raises(RunError, match="the play failed"), server:
        assert server.process.poll() is None  # it answered: the block runs
        raise RunError("the play failed")
    assert server.process.poll() is not None  # stopped, not left behind


def test_a_model_is_assembled_from_its_parts_and_checked(tmp_path, monkeypatch):
    chunks = [b"GGUF" + bytes(range(7)), b"second part", b"end"]
    for index, chunk in enumerate(chunks, start=1):
        package = tmp_path / "mods" / f"fake_part{index}"
        (package / "data").mkdir(parents=True)
        (package / "data" / "part.bin").write_bytes(chunk)
        (package / "__init__.py").write_text(
            "import os\ndef get_part_path():\n    return os.path.join(os.path.dirname(__file__), 'data', 'part.bin')\n"
        )
    monkeypatch.syspath_prepend(str(tmp_path / "mods"))
    good = hashlib.sha256(b"".join(chunks)).hexdigest()
    model = LocalModel(parts="fake_part{}", part_count=3, sha256=good, extra="x", about="fake")
    path = model_smoke.assemble("fake", model, tmp_path / "models")
    assert path.read_bytes() == b"".join(chunks)
    wrong = model.model_copy(update={"sha256": "0" * 64})
    with pytest.raises(RunError, match=r"models\.other: the assembled file's sha256 is " + good):
        model_smoke.assemble("other", wrong, tmp_path / "models")
    assert not list((tmp_path / "models").glob("other*"))  # nothing half-made is left
    missing = model.model_copy(update={"parts": "no_such_part{}"})
    with pytest.raises(RunError, match=r"no_such_part1 is not installed; pip install .*\.\[x\]"):
        model_smoke.assemble("third", missing, tmp_path / "models")


def figures(model: str, rate: float) -> dict:
    return {
        "model": model,
        "date": "2026-12-04",
        "episodes": 9,
        "accomplished_rate": rate,
        "parts": dict.fromkeys(model_smoke.PARTS, 0.5),
        "per_family": {"day_mean_lookup": {"episodes": 1, **dict.fromkeys(model_smoke.PARTS, 1.0)}},
        "failure_modes": {"parse_error": 30, "not_terminated": 9},
        "requests": 40,
        "tool_calls": 2,
        "tokens_in": 12345,
        "tokens_out": 678,
        "seconds": 99.4,
        "tokens_per_s_out": 12.5,
        "settings": {"max_tokens": 256, "episode_tokens": 2048, "n_ctx": 8192},
        "machine": "2 cores",
    }


def test_the_figures_replace_the_models_own_row(tmp_path):
    doc = tmp_path / "benchmarks.md"
    doc.write_text(f"# B\n\nbefore\n{model_smoke.BEGIN}\n{model_smoke.END}\nafter\n", encoding="utf-8")
    model_smoke.write_doc(doc, figures("b-model", 0.0))
    model_smoke.write_doc(doc, figures("a-model", 0.25))
    model_smoke.write_doc(doc, figures("b-model", 0.111))
    text = doc.read_text(encoding="utf-8")
    rows = [line for line in text.splitlines() if line.startswith("| ") and "---" not in line]
    assert [r.split("|")[1].strip() for r in rows] == ["model", "a-model", "b-model"]
    assert "| 0.111 |" in rows[2] and "parse_error 30, not_terminated 9" in rows[2] and "12,345 / 678" in rows[2]
    assert text.startswith("# B\n\nbefore\n") and text.endswith(f"{model_smoke.END}\nafter\n")
    (tmp_path / "other.md").write_text("# no table\n", encoding="utf-8")
    with pytest.raises(RunError, match="no model-smoke table"):
        model_smoke.write_doc(tmp_path / "other.md", figures("m", 0))


def test_the_server_cap_fills_only_a_missing_cap():
    seen = []
    create = capped(lambda self, **kwargs: seen.append(kwargs["max_tokens"]), 256)
    for asked in (None, 0, -1, 64, 1000):
        create(None, max_tokens=asked)
    create(None)
    assert seen == [256, 256, 256, 64, 1000, 256]


def test_the_shipped_models_config_loads_and_names_its_docs_table():
    config = load_local_models(Workspace.from_root(REPO))
    assert "gemma3-270m" in config.models and (REPO / config.smoke.release / "release.json").is_file()
    doc = (REPO / model_smoke.DOC).read_text(encoding="utf-8")
    assert model_smoke.BEGIN in doc and model_smoke.END in doc


def test_the_server_turns_the_extra_buffer_types_off():
    from types import SimpleNamespace

    from pipeline.bench.llama_server import without_extra_buffers

    params = without_extra_buffers(lambda: SimpleNamespace(use_extra_bufts=True, n_gpu_layers=0))()
    assert params.use_extra_bufts is False and params.n_gpu_layers == 0


TOOL_TURN = [
    {"role": "user", "content": "q"},
    {"role": "assistant", "content": None, "tool_calls": [{"function": {"name": "lookup", "arguments": "{}"}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "RESULT 42"},
]


def _rendered(template: str) -> str:
    import jinja2
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    from pipeline.bench.llama_server import with_tool_results

    environment = with_tool_results(ImmutableSandboxedEnvironment)(undefined=jinja2.StrictUndefined)
    return environment.from_string(template).render(messages=TOOL_TURN, add_generation_prompt=True)


def test_the_server_template_renders_tool_results():
    """chatml-function-calling's loop (its shape, in miniature) rendered nothing of a tool message; mended, the tool's
    result and its end of turn are in the prompt. Another template is left as it is."""
    template = (
        "{# functions.<function_name>: #}{% for message in messages %}<|im_start|>{{ message.role }}\n"
        "{% if message.role == 'user' %}{{ message.content }}<|im_end|>\n{% endif %}"
        "{% if message.role == 'assistant' %}{% for c in message.tool_calls %}functions.{{ c.function.name }}:\n"
        "{{ c.function.arguments }}{% endfor %}<|im_end|>\n{% endif %}"
        "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    )
    assert "RESULT 42" not in _rendered(template.replace("{# functions.<function_name>: #}", ""))  # not told apart
    assert "<|im_start|>tool\nRESULT 42<|im_end|>\n<|im_start|>assistant\n" in _rendered(template)


def test_the_server_template_of_the_pinned_llama_cpp_renders_tool_results():
    """The same on llama-cpp-python's own template (the extra local-model; skipped without it)."""
    import inspect

    chat_format = pytest.importorskip("llama_cpp.llama_chat_format")
    source = inspect.getsource(chat_format.chatml_function_calling)
    found: dict = {}
    exec(source[source.index("function_calling_template = (") : source.index("template_renderer =")].strip(), found)
    assert "<|im_start|>tool\nRESULT 42<|im_end|>\n" in _rendered(found["function_calling_template"])
