"""Reading and scoring saved traces: the episode set a trace was played on, its header and records, and its scores."""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from pydantic import ValidationError

from contracts.episodes import Episode
from contracts.runtime import EpisodeEnd, EpisodeScore, TraceHeader, TurnRecord
from contracts.tasks import SPLITS
from pipeline.core.canonical import TooLarge, digest_file, iter_rows, loads_untrusted
from pipeline.core.config import load_episodes_config
from pipeline.core.errors import RunError, StageError, clipped, shown, validation_problems
from pipeline.core.workspace import Workspace
from pipeline.harness.binding import require_trace
from pipeline.runtime.identity import display_name, identity
from pipeline.runtime.runner import RECORD_DEPTH
from pipeline.runtime.scoring import score_episode, summarize
from pipeline.runtime.simulator import slot_keywords

if TYPE_CHECKING:
    from pipeline.release.playable import Release


def episode_file(ws: Workspace, corpus: str, split: str) -> tuple[str, Path]:
    """The newest stage's episodes of a split: the audited set once it exists, else the episodes stage."""
    if split not in SPLITS:
        raise RunError(f"unknown split {split!r}: use one of {', '.join(SPLITS)}")
    for stage in ("audit", "episodes"):
        path = ws.stage_dir(corpus, stage) / f"{split}.jsonl"
        if path.is_file():
            return stage, path
    raise StageError(f"{ws.stage_dir(corpus, 'episodes')}: no episodes for {split}; run `telemetry-bench build` first")


RESTORE_EPISODES = (
    "build again (`telemetry-bench build`), or download the release again and check it with "
    "`telemetry-bench verify --release`"
)


def load_episodes(path: Path) -> list[Episode]:
    """The episodes of a split file, read a row at a time (each within MAX_ROW_BYTES, split at newlines only), each
    validated; a row that is not an episode stops the read in one line naming it (a release's files are checked
    against their digests first, but a release can be rewritten whole)."""
    episodes = []
    try:
        with path.open("rb") as handle:
            for number, row in enumerate(iter_rows(handle), start=1):
                if row:
                    try:
                        episodes.append(Episode.model_validate_json(row))
                    except ValidationError as exc:
                        raise RunError(
                            f"{path}: row {number}: not an episode ({validation_problems(exc)}); {RESTORE_EPISODES}"
                        ) from exc
    except TooLarge as exc:
        raise RunError(f"{path}: {exc}; {RESTORE_EPISODES}") from exc
    return episodes


def score_rank(score: EpisodeScore) -> tuple[bool, bool, bool]:
    """How the best of several players of one episode is chosen (any accomplishes: the controller's rule)."""
    return score.accomplished, score.task, score.protocol


WRITTEN_BY_RUN = "was it written by `telemetry-bench run`? score the trace it wrote, or play the agent again"
RECORDS: dict[str, type[TraceHeader | TurnRecord | EpisodeEnd]] = {"turn": TurnRecord, "end": EpisodeEnd}


def _trace_lines(path: Path, first_only: bool = False) -> list[str]:
    """The trace's lines, split at newlines only: a record's strings may hold U+0085, U+2028 and the other characters
    str.splitlines also breaks at (agents write them; the trace keeps them as they came)."""
    if not path.is_file():
        raise RunError(f"{path}: no such trace file")
    try:
        with path.open("rb") as handle:
            data = handle.readline() if first_only else handle.read()
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RunError(f"{path}: not UTF-8 text ({exc}); {WRITTEN_BY_RUN}") from exc
    # records end in \n only: a string may hold U+2028 or U+0085 as they are, which str.splitlines would split at
    lines = text.split("\n")
    return lines[:-1] if lines and not lines[-1] else lines


def played_on(path: Path, header: TraceHeader, turns: _Turns, episodes_path: Path) -> list[Episode]:
    """The episodes of the file a trace says it was played on: refused when the file is not that one any more, or
    when the trace holds an episode the file does not (never dropped in silence)."""
    if not episodes_path.is_file() or digest_file(episodes_path) != header.episode_set_hash:
        raise RunError(
            f"{path}: played on an episode set that {episodes_path} no longer is (hash differs); "
            "re-run the agent on the current build"
        )
    episodes = load_episodes(episodes_path)
    known = {e.id for e in episodes}
    for (episode_id, _), number in sorted(turns.first_line.items(), key=lambda item: item[1]):
        if episode_id not in known:
            raise RunError(
                f"{path}: line {number}: episode_id: {shown(episode_id)} is not an episode of {episodes_path}; "
                "the trace was changed after `telemetry-bench run` wrote it: play the agent again"
            )
    return episodes


def trace_record(
    path: Path, number: int, line: str, fix: str = WRITTEN_BY_RUN
) -> TraceHeader | TurnRecord | EpisodeEnd:
    """Line `number` of a trace validated as its record (the header on line 1, turns and ends after), or one RunError
    line naming the file, the line, the field and `fix`. Strings are valid Unicode, numbers finite."""
    where, expected = f"{path}: line {number}", "a trace header" if number == 1 else "a trace record"
    try:
        data = loads_untrusted(line, max_depth=RECORD_DEPTH)
    except ValueError as exc:
        raise RunError(f"{where}: not {expected} ({clipped(str(exc))}); {fix}") from exc
    if not isinstance(data, dict):
        raise RunError(f"{where}: not {expected} (a JSON {type(data).__name__}, not an object); {fix}")
    kind = data.get("type")
    model = TraceHeader if number == 1 else RECORDS.get(kind) if isinstance(kind, str) else None
    if model is None:
        raise RunError(f"{where}: not {expected} (type: {shown(kind)}, not turn or end); {fix}")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise RunError(f"{where}: {validation_problems(exc)}; {fix}") from exc


def _header(path: Path, lines: list[str]) -> TraceHeader:
    if not lines:
        raise RunError(f"{path}: empty, no trace header; {WRITTEN_BY_RUN}")
    return trace_record(path, 1, lines[0])


def trace_header(path: Path) -> TraceHeader:
    """Only the header of a trace (which corpus, split and agent), without reading its records."""
    return _header(path, _trace_lines(path, first_only=True))


def agent_name(header: TraceHeader) -> str:
    """Who played the trace, as people call it: the agent kind and its model (`openai gpt-4o-mini`, `oracle`)."""
    return display_name(header.agent, identity(header.agent, header.settings)["model"])


def read_trace(path: Path) -> tuple[TraceHeader, dict, set[int]]:
    """The header, the turns by (episode, run) and player, and the runs; episode runs that ended in infra_error are
    in `turns.infra` (a set of (episode, run)), left out of the scores. Every line is validated as its record first."""
    lines = _trace_lines(path)
    header = _header(path, lines)
    turns: _Turns = _Turns(lambda: defaultdict(list))
    runs: set[int] = set()
    seen: dict[tuple, int] = {}
    for number, line in enumerate(lines[1:], start=2):
        record = trace_record(path, number, line)
        if record.run >= header.repeat:
            raise RunError(f"{path}: line {number}: run: {record.run} is not below the header's repeat {header.repeat}")
        unit = (record.episode_id, record.run)
        refuse_repeat(seen, path, number, record, WRITTEN_BY_RUN)
        turns.first_line.setdefault(unit, number)
        runs.add(record.run)
        if isinstance(record, TurnRecord):
            turns[unit][record.player].append(record)
        else:
            turns.ended.add(unit)
            if record.infra_error:
                turns.infra.add(unit)
    return header, turns, runs


def refuse_repeat(seen: dict[tuple, int], path: Path, number: int, record: TurnRecord | EpisodeEnd, fix: str) -> None:
    """Note the trace line `number` as its record's (record_key) in `seen`; one error line when an earlier line held
    that record: a record is scored once (read_trace, and --resume before it writes anything)."""
    first = seen.setdefault(record_key(record), number)
    if first != number:
        raise RunError(
            f"{path}: line {number}: {record_key(record)[0]} {shown(record.episode_id)} run {record.run} "
            f"repeats line {first}; a record is scored once: {fix}"
        )


def record_key(record: TurnRecord | EpisodeEnd) -> tuple:
    """What a record is the only one of: a player's turn number, or its end, in one run of one episode (a trace
    holding it twice would count its turns twice)."""
    turn = (f"turn {record.turn}",) if isinstance(record, TurnRecord) else ("end",)
    return (*turn, record.episode_id, record.run, record.player)


class _Turns(defaultdict):
    """Turns by (episode, run) and player, with the episode runs that ended, those that ended in infra_error, and the
    line each episode run starts on (for messages)."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.ended: set[tuple[str, int]] = set()
        self.infra: set[tuple[str, int]] = set()
        self.first_line: dict[tuple[str, int], int] = {}


class Played(NamedTuple):
    """One run of one episode as scored: the player that counts (the best of a controller's policies), its turns and
    score."""

    episode: Episode
    run: int
    player: str | None
    turns: list[TurnRecord]
    score: EpisodeScore


def played_episodes(ws: Workspace, path: Path, release: Release | None = None) -> tuple[TraceHeader, list[Played]]:
    """A saved trace scored against the episodes it was played on (the episode file's hash must match). A trace played
    on a release folder is scored on that folder (`release`), else on the project's built release."""
    scored = scored_trace(ws, path, release)
    return scored.header, scored.played


class Scored(NamedTuple):
    """One trace read and scored: its header, every scored episode run, its turns as recorded, the split's size."""

    header: TraceHeader
    played: list[Played]
    turns: _Turns
    in_split: int  # episodes in the split the trace was played on


def scored_trace(ws: Workspace, path: Path, release: Release | None = None, expect: str | None = None) -> Scored:
    """A saved trace read and scored once, for `played_episodes`, `score_traces` and `trace_summaries`; with `expect`
    (a release digest the user trusts), refused unless its header records that release."""
    header, turns, runs = read_trace(path)
    require_trace(expect, path, header.release_digest)
    if header.episode_set == "release":
        from pipeline.release.playable import Release

        release = release or Release(ws.stage_dir(header.corpus, "release"))
        episodes_path, keywords = release.episodes_path(header.split), release.keywords()
    else:
        episodes_path, keywords = ws.stage_dir(header.corpus, header.episode_set) / f"{header.split}.jsonl", None
    episodes = played_on(path, header, turns, episodes_path)
    keywords = keywords or slot_keywords(load_episodes_config(ws))
    out = []
    for run in sorted(runs):
        for episode in episodes:
            if (episode.id, run) in turns.infra:  # the endpoint failed, not the agent: not scored (counted apart)
                continue
            if header.settings.get("limit") is None or (episode.id, run) in turns:
                played = turns.get((episode.id, run)) or {None: []}
                scored = [(player, t, score_episode(episode, t, keywords, run)) for player, t in played.items()]
                player, chosen, score = max(scored, key=lambda p: score_rank(p[2]))
                out.append(Played(episode, run, player, chosen, score))
    return Scored(header, out, turns, len(episodes))


def score_traces(
    ws: Workspace,
    paths: list[Path],
    release: Release | None = None,
    prices: dict | None = None,
    refused: list[tuple[Path, str]] | None = None,
    expect: str | None = None,
) -> list[dict]:
    """Score saved traces against the episodes they were played on: one summary per agent identity, corpus and split
    (pipeline/runtime/identity.py), never two identities pooled. Episode runs that ended in infra_error are left out
    and counted (`infra_errors`); runs without an end record are counted as `unfinished` (scored as played). A summary
    that covers fewer episodes than its split holds, in any run, is `partial` (never ranked). With `refused`, a trace
    that cannot be scored (another episode set, not a trace, another release than `expect`) is listed there with its
    reason instead of stopping."""
    traces: list[tuple[Path, Scored]] = []
    for path in paths:
        try:
            traces.append((path, scored_trace(ws, path, release, expect)))  # each trace is read once
        except (RunError, StageError) as exc:
            if refused is None:
                raise
            refused.append((path, str(exc)))
    return trace_summaries(traces, prices)


def trace_summaries(traces: list[tuple[Path, Scored]], prices: dict | None = None) -> list[dict]:
    """Traces already scored (`scored_trace`) as one summary per agent identity, corpus, split and release played
    (pipeline.harness.binding: runs on two releases are never pooled), ordered by corpus, split, identity label and
    release digest."""
    groups: dict[tuple[str, str, str, str], list[tuple[Path, Scored]]] = defaultdict(list)
    for path, scored in traces:
        who, header = identity(scored.header.agent, scored.header.settings), scored.header
        groups[(header.corpus, header.split, who["digest"], header.release_digest or "")].append((path, scored))
    summaries = [_summary(members, prices) for _, members in sorted(groups.items())]
    return sorted(summaries, key=lambda s: (s["corpus"], s["split"], s["identity"]["label"], s["release_digest"] or ""))


def _summary(members: list[tuple[Path, Scored]], prices: dict | None) -> dict:
    header = members[0][1].header
    played = [p for _, scored in members for p in scored.played]
    by_run = Counter((i, p.run) for i, (_, scored) in enumerate(members) for p in scored.played)  # a trace's runs
    records = [t for _, scored in members for unit in scored.turns.values() for ts in unit.values() for t in ts]
    summary = summarize(p.score for p in played)
    covered = min(by_run.values(), default=0)
    in_split = members[0][1].in_split
    who = identity(header.agent, header.settings)
    summary.update(
        identity=who,
        corpus=header.corpus,
        split=header.split,
        episodes_digest=header.episode_set_hash,
        release_digest=header.release_digest,
        traces=[str(path) for path, _ in members],
        episodes_in_split=in_split,
        partial=covered < in_split,
        least_covered=covered,
        infra_errors=sum(len(scored.turns.infra) for _, scored in members),
        unfinished=sum(1 for _, s in members for unit in s.turns if unit not in s.turns.ended),
        usage=usage_totals(records, who["model"], prices),
        per_episode=_per_episode(played),
        latency_ms=_latency(records),
        rows=[p.score.model_dump() for p in played],
    )
    return summary


TOKENS_IN = ("prompt_tokens", "input_tokens")
TOKENS_OUT = ("completion_tokens", "output_tokens")


def usage_totals(records: list[TurnRecord], model: str | None, prices: dict | None) -> dict:
    """Tokens in and out summed over every turn the agents reported usage for, and their cost when the price table
    names the model (US dollars per million tokens in and out)."""
    tokens_in = sum(sum(r.usage.get(k, 0) for k in TOKENS_IN) for r in records if r.usage)
    tokens_out = sum(sum(r.usage.get(k, 0) for k in TOKENS_OUT) for r in records if r.usage)
    totals: dict[str, Any] = {
        "tokens_in": tokens_in,
        "tokens_out": tokens_out,
        "turns_with_usage": sum(1 for r in records if r.usage),
    }
    price = (prices or {}).get(model) if model else None
    if price is not None:
        totals["cost_usd"] = round((tokens_in * price["input"] + tokens_out * price["output"]) / 1e6, 6)
    return totals


def _per_episode(played: list[Played]) -> dict:
    """Turns and tool calls per scored episode run (means)."""
    n = max(1, len(played))
    calls = sum(1 for p in played for t in p.turns if t.action and t.action.get("kind") == "call_tool")
    return {"turns": round(sum(len(p.turns) for p in played) / n, 4), "tool_calls": round(calls / n, 4)}


def _latency(records: list[TurnRecord]) -> dict:
    """p50 and p95 of the agent's turn time and of an episode run's wall time (the sum of its turns), in ms."""
    per_run: dict[tuple, float] = defaultdict(float)
    for r in records:
        per_run[(r.episode_id, r.run, r.player)] += r.elapsed_ms

    return {"turn": _quantiles([r.elapsed_ms for r in records]), "episode": _quantiles(list(per_run.values()))}


def _quantiles(values: list[float]) -> dict[str, float | None]:
    """The p50 and p95 of the values (nearest rank: always a value that was measured)."""
    if not values:
        return {"p50": None, "p95": None}
    ordered = sorted(values)
    return {f"p{q}": round(ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)], 3) for q in (50, 95)}
