"""Who played a trace: the agent kind, its model and the settings that change what it does. Two traces of one
identity may be pooled (repeated runs); two identities never are (`score`, the leaderboard)."""

from __future__ import annotations

from typing import Any

from pipeline.core.canonical import digest_value

# Settings that say where a model is served or how a run runs, never what the agent plays: a trace resumed
# against another endpoint or key is the same identity, and so is one played with more workers.
NOT_BEHAVIOUR = ("runtime", "limit", "base_url", "api_key_env")


def behaviour(settings: dict[str, Any]) -> dict[str, Any]:
    """The settings that change what the agent does (model, temperature, prompts, options...)."""
    return {k: v for k, v in settings.items() if k not in NOT_BEHAVIOUR}


def display_name(agent: str, model: str | None) -> str:
    """The agent kind and its model, as people call the agent: `openai gpt-4o-mini`, or `oracle` without a model."""
    return f"{agent} {model}" if model else agent


def identity(agent: str, settings: dict[str, Any]) -> dict[str, str | None]:
    """The agent kind, its model (None for a model-free agent), the digest of its behaviour settings (xxh3-128 of
    their canonical JSON) and a label to show: `openai gpt-4o-mini #1a2b3c4d`."""
    chosen = behaviour(settings)
    model = chosen.get("model")
    digest = digest_value({"agent": agent, "settings": chosen})
    name = str(model) if model is not None else None
    return {"agent": agent, "model": name, "digest": digest, "label": f"{display_name(agent, name)} #{digest[:8]}"}
