"""What the audit keeps of the rows no policy excluded: every split trimmed to the declared commitment mix and its
blind-guessable verdicts balanced, and the gates that check both on the released rows (commitment_mix,
answer_balance)."""

from __future__ import annotations

import math
from collections import Counter

from contracts.episodes import Episode, EpisodesConfig
from contracts.tasks import SPLITS
from pipeline.core.canonical import digest
from pipeline.episodes.lift import commitment_instant, week_index
from pipeline.episodes.rules import mix_excess, off_mix
from pipeline.runtime.preflight import unbalanced_verdicts, verdicts


def trim_to_mix(
    released: list[Episode],
    shares: dict[str, float],
    tolerance: float,
    balance: EpisodesConfig | None = None,
) -> tuple[list[Episode], dict[str, dict[str, int]], dict[str, dict[str, int]]]:
    """Fewer rows rather than a skewed mix: while a split's commitment mix, or the corpus's, is further from the
    declared shares than the tolerance allows (rules.off_mix), leave out one row of its outcome most over its share.
    The row is taken where that outcome is the largest share of its site's, commitment week's and family's rows, so
    that the trim leaves no site, week or family whose remaining rows tell the outcome (a building whose answers were
    trimmed away keeps only its outages); among equals, the last by the xxh3 of its id, an order free of the gold. A
    split with no row of some outcome cannot be mended so: it shrinks to the few rows one row of slack allows, and
    the commitment-mix gate refuses the release.

    With `balance` (configs/episodes.toml), the verdicts an agent could guess blind are balanced in every split and
    in the corpus (preflight.unbalanced_verdicts: no value over balance_max_share of a split's rows of that verdict,
    where it has balance_min_rows of them): while one is not, a row giving that value in that split is left out, the
    one whose commitment outcome is most over its share in its split (so the mix loses least). Returns the kept rows,
    the rows left out for the mix per split and outcome, and those left out for balance per verdict and value."""
    rows = sorted(released, key=lambda e: digest(f"trim|{e.id}"))
    groups = {id(e): _groups(e) for e in rows}  # once per row (each reads its commitment calls), by object
    at: Counter = Counter()  # rows per group (a site key, a week, a family) and per (group, outcome)
    for episode in rows:
        for group in groups[id(episode)]:
            at[group] += 1
            at[(group, episode.commitment_outcome)] += 1
    for_mix: dict[str, Counter] = {}
    for_balance: dict[str, Counter] = {}
    found = {id(e): verdicts(e, balance) for e in rows} if balance is not None else {}

    def off(scope: list[Episode]) -> bool:
        return bool(off_mix(Counter(e.commitment_outcome for e in scope), shares, tolerance))

    def unbalanced() -> tuple[str, str, list[Episode]] | None:
        over = unbalanced_verdicts(rows, balance) if balance is not None else []
        if not over:
            return None
        split, verdict, value = over[0]["split"], over[0]["verdict"], over[0]["value"]
        scope = [e for e in rows if split in ("corpus", e.split)]
        return verdict, value, [e for e in scope if found[id(e)].get(verdict) == value]

    while True:
        scopes = (*([e for e in rows if e.split == split] for split in SPLITS), rows)
        scope = next((s for s in scopes if off(s)), None)
        if scope is not None:
            excess = mix_excess(Counter(e.commitment_outcome for e in scope), shares)
            largest = max(sorted(excess), key=lambda o: excess[o])
            pool = [e for e in scope if e.commitment_outcome == largest]
            crowd = [sum(at[(g, largest)] / at[g] for g in groups[id(e)]) for e in pool]
            episode = pool[max(range(len(pool)), key=lambda i: (round(crowd[i], 9), i))]
            for_mix.setdefault(episode.split, Counter())[largest] += 1
        else:
            found_over = unbalanced()
            if found_over is None:
                break
            obligation, code, pool = found_over
            split_excess = {
                split: mix_excess(Counter(e.commitment_outcome for e in rows if e.split == split), shares)
                for split in SPLITS
            }
            over = [split_excess[e.split][e.commitment_outcome] for e in pool]
            episode = pool[max(range(len(pool)), key=lambda i: (round(over[i], 9), i))]
            for_balance.setdefault(obligation, Counter())[code] += 1
        rows.remove(episode)
        for group in groups[id(episode)]:
            at[group] -= 1
            at[(group, episode.commitment_outcome)] -= 1

    kept = {e.id for e in rows}
    trimmed = {split: dict(sorted(for_mix[split].items())) for split in SPLITS if split in for_mix}
    balance = {obligation: dict(sorted(codes.items())) for obligation, codes in sorted(for_balance.items())}
    return [e for e in released if e.id in kept], trimmed, balance


def _groups(episode: Episode) -> tuple[tuple, ...]:
    """The groups whose remaining rows must not tell a row's outcome: the sites it names (one key), the week of its
    commitment and its family."""
    phases = getattr(episode, "phases", None)
    at = commitment_instant([c.model_dump() for c in phases[-1].canonical_calls]) if phases else None
    week = int(week_index(at)) if at is not None else None
    return ("site", *sorted(set(episode.site_ids))), ("week", week), ("family", getattr(episode, "family", None))


def answer_balance_gate(released: list[Episode], lifts: EpisodesConfig) -> dict:
    """Every verdict an agent could guess blind (the commitment outcome, each balanced answer's code) is balanced in
    every released split and in the corpus: no value over balance_max_share of the rows of that verdict where there
    are balance_min_rows of them (the trim sees to it; the release is refused when it did not)."""
    over = unbalanced_verdicts(released, lifts)
    why = "; ".join(
        f"{'the corpus' if o['split'] == 'corpus' else 'split ' + o['split']}: {o['verdict']} '{o['value']}' in "
        f"{o['count']} of {o['rows']} rows ({o['share']}), over "
        f"{lifts.balance_max_share}{' + one row' if o['rows'] < lifts.balance_min_rows else ''}"
        for o in over
    )
    gate = {
        "rule": "no value of a verdict an agent could guess blind "
        f"(commitment, {', '.join(sorted(lifts.balanced_answers))}) over {lifts.balance_max_share} of a split's "
        f"rows of it, in every split and the corpus (within one row where it has fewer than {lifts.balance_min_rows})",
        "max_share": lifts.balance_max_share,
        "min_rows": lifts.balance_min_rows,
        "unbalanced": over,
        "status": "fail" if over else "pass",
    }
    return {**gate, "why": why} if over else gate


def mix_of(rows: list[Episode], shares: dict[str, float]) -> dict[str, float]:
    counts = Counter(e.commitment_outcome for e in rows)
    return {o: round(counts.get(o, 0) / max(1, len(rows)), 4) for o in shares}


def commitment_mix_gate(audited: list[Episode], released: list[Episode], lifts: EpisodesConfig) -> dict:
    """The released commitment mix follows the declared shares within the tolerance in every split and the corpus
    (the trim sees to it); the release is refused when the trim could not mend it: a split of at least 1/tolerance
    audited rows (where one row is within the tolerance) without a row of some outcome, or a corpus without one
    (a release whose commitments are all one outcome tests no quality gate)."""
    shares, tolerance = lifts.outcome_shares, lifts.mix_tolerance
    enough = math.ceil(round(1 / tolerance, 9))
    why = None
    for split in (*SPLITS, None):
        rows = [e for e in audited if split is None or e.split == split]
        missing = [o for o in shares if not any(e.commitment_outcome == o for e in rows)]
        if rows and missing and (split is None or len(rows) >= enough):
            where = f"split {split}" if split else "the corpus"
            mix = ", ".join(f"{o} {v}" for o, v in mix_of(rows, shares).items())
            why = f"{where} has no {' or '.join(missing)} row ({mix} over {len(rows)} audited rows)"
            break
    if not released and why is None:
        why = "no row is left"
    per_split = {split: mix_of([e for e in released if e.split == split], shares) for split in SPLITS}
    gate = {
        "rule": "every commitment outcome within "
        f"{tolerance} of its declared share ({', '.join(f'{o} {v}' for o, v in shares.items())}) in every split and "
        "the corpus (within one row where one row is more)",
        "rows": len(released),
        "mix": mix_of(released, shares),
        "per_split": per_split,
        "split_rows": {split: sum(e.split == split for e in released) for split in SPLITS},
        "shares": dict(shares),
        "tolerance": tolerance,
        "status": "fail" if why else "pass",
    }
    return {**gate, "why": why} if why else gate
