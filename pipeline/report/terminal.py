"""`inspect episode` in the terminal: the gold path and, with a trace, the agent's run, with rich formatting."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console, Group
from rich.panel import Panel
from rich.rule import Rule
from rich.table import Table
from rich.text import Text

from contracts.agent_view import AgentObservation
from contracts.answers import AnswerForm
from contracts.episodes import Episode
from contracts.tasks import SPLITS
from pipeline.core.config import load_episodes_config
from pipeline.core.errors import RunError
from pipeline.core.workspace import Workspace
from pipeline.harness.episodes import agent_views, find_episode
from pipeline.harness.traces import agent_name, load_episodes, played_episodes
from pipeline.report.conversation import (
    Conversation,
    failure_modes_of,
    gold_conversation,
    gold_records,
    played_conversation,
)
from pipeline.runtime.simulator import slot_keywords
from pipeline.tools.access import ToolStore

if TYPE_CHECKING:
    from pipeline.release.playable import Release


def episode_conversations(
    ws: Workspace, corpus: str, episode_id: str, trace: Path | None = None
) -> tuple[Episode, list[Conversation]]:
    """The episode's gold path and, given a trace, run 0 of that trace on the episode."""
    episode = find_episode(ws, corpus, episode_id)
    played = None
    if trace is not None:
        header, runs = played_episodes(ws, trace)
        if header.corpus != corpus:
            raise RunError(f"{trace}: a trace of corpus {header.corpus}, not {corpus}; pass --corpus {header.corpus}")
        played = next((p for p in runs if p.episode.id == episode_id and p.run == 0), None)
        if played is None:
            raise RunError(
                f"{trace}: episode {episode_id} was not played in this trace (split {header.split}); "
                "pick an episode of that split"
            )
    keywords = slot_keywords(load_episodes_config(ws))
    store = ToolStore.for_corpus(ws, corpus)
    try:
        gold = gold_records(episode, store, keywords)
        conversations = [gold_conversation(episode, gold)]
        if played is not None:
            modes = failure_modes_of(episode, played.turns, store, keywords)
            conversations.append(played_conversation(agent_name(header), played, gold, keywords, modes))
    finally:
        store.close()
    return episode, conversations


def _conversation(c: Conversation) -> Group:
    title = Text(c.who, style="bold")
    if c.note:
        title.append(f" ({c.note})", style="dim")
    if c.accomplished is not None:
        title.append(
            "  accomplished" if c.accomplished else "  not accomplished",
            style="green" if c.accomplished else "bold red",
        )
    parts: list = [Rule(title, align="left")]
    if c.issues:
        parts.append(Text(f"protocol issues: {', '.join(c.issues)}", style="yellow"))
    if c.failure_modes:
        parts.append(Text(f"failure modes: {', '.join(c.failure_modes)}", style="yellow"))
    grid = Table.grid(padding=(0, 1))
    grid.add_column(no_wrap=True, min_width=8)
    grid.add_column(overflow="fold")
    grid.add_row(Text("USER", style="bold cyan"), Text(c.opening))
    for turn in c.turns:
        grid.add_row(Text(f"AGENT {turn.number}", style="bold red" if turn.off_path else "bold blue"), Text(turn.text))
        if turn.off_path:
            grid.add_row(
                Text("✗", style="bold red"), Text(f"left the gold path here: {turn.off_path}", style="bold red")
            )
        if turn.issues:
            grid.add_row("", Text(f"issues: {', '.join(turn.issues)}", style="yellow"))
        if turn.result_short is not None:
            grid.add_row("", Text(f"-> {turn.result_short}", style="dim"))
        if turn.reply is not None:
            grid.add_row(
                Text("USER", style="bold cyan"),
                Text.assemble(turn.reply, (f"  [{turn.event}]" if turn.event else "", "dim")),
            )
    if c.stopped_early:
        grid.add_row(
            Text("✗", style="bold red"),
            Text(f"stopped before the gold path ended: {c.stopped_early}", style="bold red"),
        )
    parts.append(grid)
    return Group(*parts)


def print_episode(console: Console, episode: Episode, conversations: list[Conversation]) -> None:
    header = Text.assemble(
        (episode.id, "bold"),
        f"\nsplit {episode.split} · family {episode.family} · {episode.interaction_mode}\n",
        f"commitment {episode.commitment_outcome} · turn budget {episode.turn_budget} · evidence "
        f"{', '.join(episode.evidence_stream_ids)}\n",
        ("hidden instruction: ", "dim"),
        episode.hidden_instruction,
    )
    console.print(Panel(header, title="episode", title_align="left"))
    for conversation in conversations:
        console.print(_conversation(conversation))


def episode_agent_views(ws: Workspace, corpus: str, episode_id: str) -> list[AgentObservation]:
    """What the agent receives before each turn along the episode's gold path."""
    episode = find_episode(ws, corpus, episode_id)
    store = ToolStore.for_corpus(ws, corpus)
    try:
        return agent_views(episode, store, slot_keywords(load_episodes_config(ws)))
    finally:
        store.close()


def release_agent_views(release: Release, episode_id: str) -> list[AgentObservation]:
    """The same, from a release folder on its own (its episodes, simulator phrases and tool store)."""
    for split in SPLITS:
        for episode in load_episodes(release.episodes_path(split)):
            if episode.id == episode_id:
                store = release.store()
                try:
                    return agent_views(episode, store, release.keywords())
                finally:
                    store.close()
    raise RunError(
        f"no episode {episode_id!r} in the release of {release.corpus}; its train/dev/test.jsonl list the ids"
    )


def _form_rows(grid: Table, form: AnswerForm) -> None:
    for f in form.fields:
        unit = f" in {f.unit_label}" if f.unit else ""
        grid.add_row(Text("form", style="magenta"), Text(f"{f.name}: {f.type}{unit}. {f.description}"))
        for code, meaning in f.codes.items():
            grid.add_row("", Text(f"  {code}: {meaning}", style="dim"))


def print_agent_views(console: Console, views: list[AgentObservation]) -> None:
    """Each turn's view: the messages new since the previous turn, and the answer form when a question opens."""
    seen = 0
    for view in views:
        grid = Table.grid(padding=(0, 1))
        grid.add_column(no_wrap=True, min_width=8)
        grid.add_column(overflow="fold")
        for message in view.messages[seen:]:
            if message.role == "user":
                grid.add_row(Text("USER", style="bold cyan"), Text(message.text or ""))
                if message.answer_form is not None:
                    _form_rows(grid, message.answer_form)
            elif message.role == "agent":
                grid.add_row(
                    Text("AGENT", style="bold blue"),
                    Text(json.dumps(message.action, ensure_ascii=False, sort_keys=True)),
                )
            else:
                grid.add_row(
                    Text(f"TOOL {message.call_id}", style="dim"),
                    Text(json.dumps(message.result, ensure_ascii=False, sort_keys=True)),
                )
        seen = len(view.messages)
        console.print(
            Rule(
                Text(f"turn {view.turn + 1}/{view.budget}: what the agent receives (new messages)", style="bold"),
                align="left",
            )
        )
        console.print(grid)
