"""The audit stage: shortcut policies play the candidate episodes; rows a policy completes without the
capability they claim are dropped; positive controls are recorded."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from contracts.episodes import AuditConfig, Episode, EpisodesConfig
from contracts.runtime import TurnRecord
from contracts.tasks import SPLITS, FamiliesConfig
from pipeline.audit.policies import ShortcutPolicy
from pipeline.audit.probe import artifact_probe
from pipeline.episodes.stage import read_episodes
from pipeline.manifest import StageResult, write_splits
from pipeline.runtime.agents import Agent, OracleAgent
from pipeline.runtime.preflight import preflight
from pipeline.runtime.runner import run_episode
from pipeline.runtime.scoring import score_episode
from pipeline.runtime.simulator import slot_keywords
from pipeline.store.build import STORE_FILE
from pipeline.tools.access import ToolStore

MIN_OUTCOME_SHARE = 0.15


def required_capabilities(episode: Episode, cfg: AuditConfig) -> set[str]:
    """Capabilities an episode claims to test, from its obligations, commitment outcome and phases."""
    needed = {cap for cap, obligations in cfg.capabilities.items() if set(obligations) & set(episode.obligations)}
    needed |= {cap for cap, outcomes in cfg.outcome_capabilities.items() if episode.commitment_outcome in outcomes}
    commit = episode.phases[-1]
    reading = any(c.tool == "lookup_observation" for c in commit.canonical_calls)
    for cap, kinds in cfg.phase_capabilities.items():
        if any(p.type in kinds for p in episode.phases) or (reading and commit.gold["reason"] in kinds):
            needed.add(cap)
    return needed


def policies(store: ToolStore, cfg: AuditConfig, families: FamiliesConfig, lifts: EpisodesConfig) -> list[ShortcutPolicy]:
    return [ShortcutPolicy(p.name, p.lacks, store, families, lifts) for p in cfg.policies]


def accomplishes(agent: Agent, episode: Episode, store: ToolStore, keywords: dict) -> bool:
    turns = [r for r in run_episode(agent, episode, store, keywords) if isinstance(r, TurnRecord)]
    return score_episode(episode, turns, keywords).accomplished


def run_audit(store_dir: Path, episodes_dir: Path, cfg: AuditConfig, families: FamiliesConfig, lifts: EpisodesConfig,
              out: Path) -> StageResult:
    store = ToolStore(store_dir / STORE_FILE)
    keywords = slot_keywords(lifts)
    try:
        candidates = read_episodes(episodes_dir)
        players = policies(store, cfg, families, lifts)
        wins_on_candidates, excluded_by = Counter(), Counter()
        released = []
        for episode in candidates:
            needed = required_capabilities(episode, cfg)
            excluded = False
            for policy in players:
                if accomplishes(policy, episode, store, keywords):
                    wins_on_candidates[policy.name] += 1
                    if policy.lacks in needed and not excluded:
                        excluded_by[policy.name] += 1
                        excluded = True
            if not excluded:
                released.append(episode)
        oracle = OracleAgent()
        oracle_ok = sum(accomplishes(oracle, e, store, keywords) for e in released)
        checks = preflight(released, store, lifts)
    finally:
        store.close()
    counts = write_splits(out, released)
    probe = artifact_probe(released, lifts, cfg.artifact_probe)
    outcomes = Counter(e.commitment_outcome for e in released)
    mix = {o: round(outcomes.get(o, 0) / max(1, len(released)), 4) for o in ("answer", "abstain", "re_clarify")}
    details = {
        "candidates": len(candidates), "released": len(released),
        "excluded_by_policy": {p.name: excluded_by.get(p.name, 0) for p in cfg.policies},
        "completions_on_candidates": {p.name: wins_on_candidates.get(p.name, 0) for p in cfg.policies},
        "commitment_mix": mix,
        "controls": {
            "every_policy_wins_some_candidate": all(wins_on_candidates.get(p.name, 0) > 0 for p in cfg.policies),
            "oracle_accomplished_released": oracle_ok, "oracle_all_released": oracle_ok == len(released),
            "preflight_issue_count": checks["issue_count"],
            "commitment_mix_ok": all(v >= MIN_OUTCOME_SHARE for v in mix.values()),
            "artifact_probe_ok": probe["status"] != "fail",
        },
        "artifact_probe": probe,
        "policies": {p.name: {"lacks": p.lacks, "description": p.description} for p in cfg.policies},
    }
    return StageResult(outputs=[f"{s}.jsonl" for s in SPLITS], row_counts=counts, details=details)
