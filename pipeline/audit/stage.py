"""The audit stage: shortcut policies play the candidate episodes; rows a policy completes without the
capability they claim are dropped; positive controls are recorded."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from contracts.answers import AnswersConfig
from contracts.episodes import AuditConfig, Episode, EpisodesConfig, Gates, Policy
from contracts.runtime import EpisodeScore, TurnRecord
from contracts.tasks import SPLITS, FamiliesConfig
from pipeline.audit.fixtures import both_withheld
from pipeline.audit.gates import gate_of
from pipeline.audit.guessers import GUESSER_KINDS, Guesser
from pipeline.audit.policies import ShortcutPolicy
from pipeline.audit.probe import accuracy_gate, allowed_margin, artifact_probe, majority_share
from pipeline.audit.shared import SharedPlays, outcome
from pipeline.audit.trim import answer_balance_gate, commitment_mix_gate, mix_of, trim_to_mix
from pipeline.core.manifest import StageResult, require_manifest, write_splits
from pipeline.core.progress import bar
from pipeline.episodes.rules import mix_slack
from pipeline.episodes.stage import Variants, read_episodes
from pipeline.runtime.agents import Agent, OracleAgent
from pipeline.runtime.preflight import preflight
from pipeline.runtime.runner import run_episode
from pipeline.runtime.simulator import slot_keywords
from pipeline.store.reader import STORE_FILE
from pipeline.tasks.probes import grid_rules
from pipeline.tools.access import ToolStore


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


def policies(
    store: ToolStore,
    cfg: AuditConfig,
    families: FamiliesConfig,
    lifts: EpisodesConfig,
    rows: list[Episode] | None = None,
    zone: str = "UTC",
) -> list[ShortcutPolicy]:
    """The configured policies; guessers remember `rows` (the candidates), each row's own split left out. `zone` is
    the corpus's time zone (the clock's local time where the store names no zone for a site)."""
    zone_of = site_zones(store, zone)
    guessers = {
        kind: Guesser(kind, rows or [], lifts, cfg.guessers, zone_of)
        for kind in GUESSER_KINDS
        if any(p.kind == kind for p in cfg.policies)
    }
    players = []
    for p in cfg.policies:  # grid rules: one player per rule (grid and rounding); a row is theirs if any rule wins it
        for rule in grid_rules(families.grid_minutes) if p.kind == "grid_rules" else [None]:
            players.append(
                ShortcutPolicy(
                    p.name, p.lacks, store, families, lifts, kind=p.kind, guesser=guessers.get(p.kind), rule=rule
                )
            )
    return players


def site_zones(store: ToolStore, zone: str) -> Callable[[str], str]:
    """The IANA zone of a stream's site: the store's `timezone` of the site where it has one, else the corpus's zone
    (configs/corpora time.timezone: the wall-clock zone its timestamps were written in, UTC unless it says otherwise,
    as for pvdaq's US sites, whose files are in UTC)."""

    def zone_of(stream_id: str) -> str:
        stream = store.streams.get(stream_id)
        site = store.sites.get(stream["site_id"], {}) if stream else {}
        return site.get("timezone") or zone

    return zone_of


def phases_needing(episode: Episode, capability: str, cfg: AuditConfig) -> list[int]:
    """The phases of an episode that need a capability by their type or commitment reason (e.g. nearest lookups)."""
    kinds = set(cfg.phase_capabilities.get(capability, []))
    reading = any(c.tool == "lookup_observation" for c in episode.phases[-1].canonical_calls)
    return [
        i
        for i, p in enumerate(episode.phases)
        if p.type in kinds or (p.type == "commitment" and reading and p.gold.get("reason") in kinds)
    ]


def play(agent: Agent, episode: Episode, store: ToolStore, keywords: dict) -> tuple[EpisodeScore, str | None]:
    """The agent's score on the episode, and the decision it gave at the commitment (None if none)."""
    return outcome(
        episode, [r for r in run_episode(agent, episode, store, keywords) if isinstance(r, TurnRecord)], keywords
    )


def accomplishes(agent: Agent, episode: Episode, store: ToolStore, keywords: dict) -> bool:
    return play(agent, episode, store, keywords)[0].accomplished


def _gate(
    policy: Policy,
    released: list[Episode],
    won: set[str],
    decisions: dict[str, str | None],
    excluded: int,
    control: dict,
    needed: dict[str, set[str]],
    gates: Gates,
    by_rule: dict[str, set[str]],
    shares: dict[str, float],
) -> dict:
    """The gate of one policy over the released rows, with its figures and status (pass, fail, insufficient_rows)."""
    if policy.gate == "exclude":
        claimed = sum(e.id in won and policy.lacks in needed[e.id] for e in released)
        status = "fail" if claimed else "pass" if control["ok"] else "unproven"
        gate = {
            "rule": f"wins no released row that needs {policy.lacks} (the rows it won were excluded)",
            "excluded": excluded,
            "won": claimed,
            "positive_control": control,
            "status": status,
        }
        return (
            {**gate, "note": f"its positive control did not hold ({control['why']}): what it excludes proves nothing"}
            if status == "unproven"
            else gate
        )
    if policy.gate == "accuracy":
        rows = [e for e in released if e.phases[-1].type == "commitment"]
        gate = {"rule": "accuracy on the commitments <= majority share + margin", **_scored(rows, decisions, gates)}
        # Each split is gated too where it has min_rows rows: a leak may be one split's (daiad's test rows once read
        # their outcome off the week counts of train and dev) and be diluted over the corpus.
        per_split = {split: _scored([e for e in rows if e.split == split], decisions, gates) for split in SPLITS}
        failed = [split for split, figures in per_split.items() if figures["status"] == "fail"]
        gate = {**gate, "per_split": per_split, "status": "fail" if failed else gate["status"]}
        if failed:
            return {**gate, "note": f"over the bound in split {', '.join(failed)}"}
        return (
            {**gate, "note": f"{len(rows)} released commitments, fewer than {gates.min_rows}"}
            if gate["status"] == "insufficient_rows"
            else gate
        )
    if policy.gate == "majority":
        return _majority_gate(released, won, decisions, shares, gates)
    rows = [e for e in released if policy.lacks in needed[e.id]]
    found = set().union(*by_rule.values()) if by_rule else set()
    wins = sum(e.id in found for e in rows)
    share = round(wins / len(rows), 4) if rows else None
    # A share over few rows moves by chance: allow `standard_errors` standard errors of the bound over them, as the
    # accuracy gates allow over the majority share.
    allowed = grid_allowance(gates.grid_rule_max_share, len(rows), gates)
    status = "insufficient_rows" if not rows else "pass" if share <= allowed else "fail"
    per_rule = {rule: sum(e.id in ids for e in rows) for rule, ids in sorted(by_rule.items())}
    gate = {
        "rule": f"answers every {policy.lacks} lookup right in at most {gates.grid_rule_max_share:.0%} of the released "
        f"rows "
        "that need one (a row counts when any one rule does)",
        "rows": len(rows),
        "won": wins,
        "share": share,
        "max_share": gates.grid_rule_max_share,
        "allowed_share": allowed,
        "won_by_rule": per_rule,
        "status": status,
    }
    return {**gate, "note": f"no released row needs a {policy.lacks} lookup"} if status == "insufficient_rows" else gate


def _scored(rows: list[Episode], decisions: dict[str, str | None], gates: Gates) -> dict:
    """A guesser's accuracy on some commitments against their majority share + the allowed margin, with the status."""
    hits = sum(decisions.get(e.id) == e.commitment_outcome for e in rows)
    accuracy = round(hits / len(rows), 4) if rows else None
    majority = majority_share([e.commitment_outcome for e in rows])
    return {
        "rows": len(rows),
        "accuracy": accuracy,
        "majority": majority,
        "margin": allowed_margin(majority, len(rows), gates),
        "status": accuracy_gate(accuracy, majority, len(rows), gates),
    }


def _majority_gate(
    released: list[Episode], won: set[str], decisions: dict[str, str | None], shares: dict[str, float], gates: Gates
) -> dict:
    """A policy committing one outcome whatever the row (the train majority) wins at most that outcome's declared share
    + majority_margin of the released rows (one row more where one row is more than the margin)."""
    committed = Counter(d for d in decisions.values() if d in shares)
    outcome = max(sorted(committed), key=lambda o: committed[o]) if committed else "answer"
    wins = sum(e.id in won for e in released)
    allowed = shares.get(outcome, 0.0) * len(released) + mix_slack(len(released), gates.majority_margin)
    share = round(wins / len(released), 4) if released else None
    return {
        "rule": f"wins at most the declared share of the outcome it commits + {gates.majority_margin} of the released "
        "rows",
        "rows": len(released),
        "commits": outcome,
        "won": wins,
        "share": share,
        "max_share": round(shares.get(outcome, 0.0) + gates.majority_margin, 4),
        "allowed_share": round(allowed / len(released), 4) if released else None,
        "status": "pass" if wins <= allowed + 1e-9 else "fail",
    }


def grid_allowance(max_share: float, rows: int, gates: Gates) -> float:
    """The share the grid rules may win over `rows` rows: the bound plus `standard_errors` standard errors of a share at
    the bound over that many rows (what chance alone adds to a rule exactly at the bound)."""
    noise = gates.standard_errors * math.sqrt(max_share * (1 - max_share) / rows) if rows else 0.0
    return round(max_share + noise, 4)


def _positive_controls(
    cfg: AuditConfig,
    by_name: dict[str, list[ShortcutPolicy]],
    candidates: list[Episode],
    needed: dict[str, set[str]],
    won: dict[str, set[str]],
    store: ToolStore,
    families: FamiliesConfig,
    lifts: EpisodesConfig,
    keywords: dict,
) -> dict[str, dict]:
    """Each policy's positive control: whether it wins what it should (a fixture or some candidate), and why not."""
    capable = ShortcutPolicy("capable", "nothing", store, families, lifts)  # the template solver, nothing switched off
    fixture = both_withheld(candidates, store, lifts, lambda e: accomplishes(capable, e, store, keywords))
    controls = {}
    for spec in cfg.policies:
        if spec.kind == "canned_clarification":
            ok = fixture is not None and accomplishes(by_name[spec.name][0], fixture, store, keywords)
            why = (
                "it lost its fixture"
                if fixture
                else "no candidate a capable solver wins withholds the time of a point named with its site"
            )
            controls[spec.name] = {
                "rule": "wins a fixture withholding both site and time",
                "fixture": fixture.id if fixture else None,
                "ok": ok,
                "why": None if ok else why,
            }
        else:
            free = sum(spec.lacks not in needed[e.id] for e in candidates)
            why = f"it won none of the {free} candidates that do not need {spec.lacks}"
            controls[spec.name] = {
                "rule": "wins some candidate",
                "ok": bool(won[spec.name]),
                "why": None if won[spec.name] else why,
            }
    return controls


def _split_by(tasks_dir: Path) -> str:
    """What the corpus's split plan holds out whole (time blocks, sites): the tasks manifest's split_rule.by."""
    manifest = require_manifest(tasks_dir, "the tasks stage")
    return str(manifest.details.get("split_rule", {}).get("by", "time"))


def _play_candidates(
    candidates: list[Episode],
    cfg: AuditConfig,
    players: list,
    by_name: dict[str, list],
    store: ToolStore,
    keywords: dict,
    label: str,
) -> tuple[dict, dict[str, set[str]], dict[str, set[str]], dict, Counter, list[Episode]]:
    """Every shortcut policy on every candidate: what each needs, wins and decides, the exclusions, and the
    candidates kept; a progress bar named `label` on a terminal (the audit's longest wait), nothing in CI logs."""
    won: dict[str, set[str]] = {p.name: set() for p in cfg.policies}
    by_rule: dict[str, set[str]] = {_rule_name(p.rule): set() for p in players if p.rule is not None}
    decisions: dict[str, dict[str, str | None]] = {p.name: {} for p in cfg.policies}
    excluded_by: Counter = Counter()
    needed, released = {}, []
    shared = SharedPlays(store, keywords)  # a policy that plays as an earlier one did is not stepped again
    with bar(f"{label}: candidates played by the shortcut policies", len(candidates)) as progress:
        for episode in candidates:
            needed[episode.id] = required_capabilities(episode, cfg)
            excluded = False
            for spec in cfg.policies:
                accomplished = False
                looks_up = any(c.tool == "lookup_observation" for p in episode.phases for c in p.canonical_calls)
                for policy in (
                    by_name[spec.name] if looks_up else by_name[spec.name][:1]
                ):  # grid rules differ only there
                    score, decisions[spec.name][episode.id] = shared.play(policy, episode)
                    accomplished = accomplished or score.accomplished
                    lookups = phases_needing(episode, spec.lacks, cfg) if policy.rule is not None else []
                    if lookups and all(score.phase_results[i] for i in lookups):  # the rule found every nearest reading
                        by_rule[_rule_name(policy.rule)].add(episode.id)
                if not accomplished:
                    continue
                won[spec.name].add(episode.id)
                if spec.gate == "exclude" and spec.lacks in needed[episode.id] and not excluded:
                    excluded_by[spec.name] += 1
                    excluded = True
            if not excluded:
                released.append(episode)
            progress.advance()
    return needed, won, by_rule, decisions, excluded_by, released


def run_audit(
    store_dir: Path,
    episodes_dir: Path,
    cfg: AuditConfig,
    families: FamiliesConfig,
    lifts: EpisodesConfig,
    out: Path,
    tasks_dir: Path,
    answers: AnswersConfig,
    zone: str = "UTC",
    label: str = "audit",
) -> StageResult:
    """Play the policies on the candidates and release the rows none wins that it should not; the preflight lifts each
    released row's other variant from its static task (`tasks_dir`, as the episodes stage does); `label` names its
    progress bar."""
    store = ToolStore(store_dir / STORE_FILE, remember_results=True)
    keywords = slot_keywords(lifts)
    try:
        candidates = read_episodes(episodes_dir)
        players = policies(store, cfg, families, lifts, candidates, zone)
        by_name = {p.name: [player for player in players if player.name == p.name] for p in cfg.policies}
        needed, won, by_rule, decisions, excluded_by, released = _play_candidates(
            candidates, cfg, players, by_name, store, keywords, label
        )
        audited = released
        released, trimmed, balanced = trim_to_mix(audited, lifts.outcome_shares, lifts.mix_tolerance, lifts)
        controls = _positive_controls(cfg, by_name, candidates, needed, won, store, families, lifts, keywords)
        oracle = OracleAgent()
        oracle_ok = sum(accomplishes(oracle, e, store, keywords) for e in released)
        variants = Variants(store, tasks_dir, lifts, families, answers, zone)
        checks = preflight(released, store, lifts, families, variants)
    finally:
        store.close()
    counts = write_splits(out, released)
    probe = artifact_probe(released, lifts, cfg.artifact_probe, cfg.gates, _split_by(tasks_dir))
    mix = mix_of(released, lifts.outcome_shares)
    mix_gate = commitment_mix_gate(audited, released, lifts)
    balance_gate = answer_balance_gate(released, lifts)
    report = {}
    for spec in cfg.policies:
        report[spec.name] = {
            "kind": spec.kind,
            "lacks": spec.lacks,
            "description": spec.description,
            "won_candidates": len(won[spec.name]),
            "won_released": sum(e.id in won[spec.name] for e in released),
            "gate": _gate(
                spec,
                released,
                won[spec.name],
                decisions[spec.name],
                excluded_by.get(spec.name, 0),
                controls[spec.name],
                needed,
                cfg.gates,
                by_rule if spec.kind == "grid_rules" else {},
                lifts.outcome_shares,
            ),
        }
    gates = {
        "artifact_probe": probe["status"],
        "commitment_mix": mix_gate["status"],
        "answer_balance": balance_gate["status"],
        **{name: r["gate"]["status"] for name, r in report.items()},
    }
    found = {
        "artifact_probe": probe,
        "commitment_mix_gate": mix_gate,
        "answer_balance_gate": balance_gate,
        "policies": report,
    }
    notes = [
        f"{name}: {status} ({gate_of(name, found)['note']}): not gated"
        for name, status in gates.items()
        if status in ("insufficient_rows", "unproven")
    ]
    details = {
        "candidates": len(candidates),
        "released": len(released),
        "excluded_by_policy": {p.name: excluded_by.get(p.name, 0) for p in cfg.policies},
        "completions_on_candidates": {p.name: len(won[p.name]) for p in cfg.policies},
        "commitment_mix": mix,
        "commitment_mix_gate": mix_gate,
        "answer_balance_gate": balance_gate,
        "trimmed_for_mix": trimmed,
        "trimmed_for_balance": balanced,
        "balanced_answers": checks["balanced_answers"],
        "controls": {
            "every_policy_wins_some_candidate": all(c["ok"] for c in controls.values()),
            "oracle_accomplished_released": oracle_ok,
            "oracle_all_released": oracle_ok == len(released),
            "preflight_issue_count": checks["issue_count"],
            "preflight_failed_checks": {check: n for check, n in checks["by_check"].items() if n},
            "commitment_mix_ok": mix_gate["status"] == "pass",
            "artifact_probe_ok": probe["status"] != "fail",
        },
        "artifact_probe": probe,
        "policies": report,
        "gates": gates,
        "gates_ok": all(v != "fail" for v in gates.values()),
        "notes": notes,
    }
    return StageResult(outputs=[f"{s}.jsonl" for s in SPLITS], row_counts=counts, details=details)


def _rule_name(rule: tuple[int, str]) -> str:
    return f"{rule[0]} min, {rule[1]}"
