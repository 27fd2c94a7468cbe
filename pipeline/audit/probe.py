"""The artifact probe (design/VALIDITY.md §3; Gururangan et al. 2018, Poliak et al. 2018): a hypothesis-only
baseline for the commitment.

It sees what an agent sees before looking anything up (the user's messages up to the commitment, with their answer
forms' sentences) and surface features of the question (timestamp format and precision, minute, hour, weekday,
template ids, the commitment's week start, family), and predicts the commitment outcome. Logistic regression and a
shallow decision tree (scikit-learn), cross-validated over all released rows with folds grouped by task. The rows
pass when the better model's accuracy is at most the majority share + margin. Deterministic: one BLAS thread, fixed
random_state, metrics rounded to 4 decimals, and the regression fitted to its unique optimum (Newton-CG to a gradient of
1e-8): stopped early, as lbfgs at its default tolerance is, the coefficients depend on the machine's BLAS kernel
(OpenBLAS picks one per processor) and a row near the boundary flips between machines.

Beside the declared grouping by task, the same models are cross-validated with folds grouped by the calendar
quarter of the commitment (`by_quarter`): what transfers across time, as from train to a test block; and grouped by the
rows' sites (`by_site`): what transfers across sites, as in a site split. They differ from folds by task where quality
is correlated in time (an outage spans weeks, or rooms share one), which folds by task let the week start reveal.
A grouping with a single group (one quarter, one site) is left out.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from datetime import UTC, datetime

import numpy as np

from contracts.episodes import ArtifactProbe, Episode, EpisodesConfig, Gates
from pipeline.audit.reading import pattern
from pipeline.episodes.lift import commitment_instant, reply_template, week_index
from pipeline.runtime.simulator import asking

FEATURES = (
    "visible text (words and bigrams)",
    "timestamp format",
    "timestamp precision",
    "minute",
    "hour",
    "weekday",
    "opening template",
    "commitment template",
    "week start",
    "family",
)
ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
OFFSET = re.compile(r"[+-]\d{2}:\d{2}\b")
SECONDS = re.compile(r"\b\d{1,2}:\d{2}:\d{2}\b")


def visible_text(episode: Episode) -> str:
    """The user's messages up to the commitment, as the agent receives them (the clarification replies included)."""
    parts = [asking(episode.initial_message, episode.phases[0].form), *(w.reply for w in episode.withheld)]
    parts += [asking(p.prompt, p.form) for p in episode.phases[1:]]
    return " ".join(parts)


def _template(templates: list[str], text: str) -> str:
    return next(
        (str(i) for i, t in enumerate(templates) if pattern(t).match(text) or pattern(t, True).match(text)), "none"
    )


def _opening_template(lifts: EpisodesConfig, family: str, opening: str) -> str:
    """Which opening template an opening follows, the same whether it says its family's slot up front or not."""
    lift = lifts.families[family]
    reply = reply_template(lifts, lift)
    told = _template([f"{t} {reply}" for t in lift.initial], opening) if reply else "none"
    return told if told != "none" else _template(lift.initial, opening)


def _commit_instant(episode: Episode) -> int | None:
    return commitment_instant([c.model_dump() for c in episode.phases[-1].canonical_calls])


def surface_features(family: str, opening: str, prompt: str, at: int | None, lifts: EpisodesConfig) -> dict[str, str]:
    """Surface features of a commitment question: how its times are written, when they are, which templates, the
    family. From what an agent reads: the opening message, the commitment's prompt and the instant it names."""
    features = {
        "family": family,
        "format": ("iso" if ISO_DATE.search(prompt) else "words") + ("_offset" if OFFSET.search(prompt) else ""),
        "precision": "seconds" if SECONDS.search(prompt) else "minutes_or_days",
        "opening_template": f"{family}:{_opening_template(lifts, family, opening)}"
        if family in lifts.families
        else "none",
        "commit_template": _template(
            [*lifts.commit_window_prompts, *lifts.commit_timestamp_prompts],
            prompt.replace(lifts.commit_options, "{options}"),
        ),
    }
    if at is not None:
        moment = datetime.fromtimestamp(at / 1e6, UTC)
        features.update(
            minute=str(moment.minute),
            hour=str(moment.hour),
            weekday=str(moment.weekday()),
            week_start=str(week_index(at)),
        )
    return features


def surface(episode: Episode, lifts: EpisodesConfig) -> dict[str, str]:
    return surface_features(
        episode.family, episode.initial_message, episode.phases[-1].prompt, _commit_instant(episode), lifts
    )


def _quarter(episode: Episode) -> str:
    at = _commit_instant(episode)
    if at is None:
        return "none"
    moment = datetime.fromtimestamp(at / 1e6, UTC)
    return f"{moment.year}-Q{(moment.month - 1) // 3 + 1}"


def _cross_validated(
    texts: list[str], surfaces: list[dict], labels: np.ndarray, groups: list[str], cfg: ArtifactProbe
) -> dict:
    from scipy.sparse import hstack
    from sklearn.feature_extraction import DictVectorizer
    from sklearn.feature_extraction.text import CountVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import GroupKFold
    from sklearn.tree import DecisionTreeClassifier

    folds = min(cfg.folds, len(set(groups)))
    models = {
        "logistic_regression": lambda: LogisticRegression(
            solver="newton-cg", tol=1e-8, max_iter=10_000, random_state=0
        ),
        "decision_tree": lambda: DecisionTreeClassifier(max_depth=cfg.tree_depth, random_state=0),
    }
    predicted = {name: np.empty(len(labels), dtype=object) for name in models}
    for train, test in GroupKFold(n_splits=folds).split(
        texts, labels, groups
    ):  # each fold's features made once, for both models
        words, kinds = CountVectorizer(ngram_range=(1, 2)), DictVectorizer()
        x_train = hstack(
            [words.fit_transform([texts[i] for i in train]), kinds.fit_transform([surfaces[i] for i in train])]
        ).tocsr()
        x_test = hstack(
            [words.transform([texts[i] for i in test]), kinds.transform([surfaces[i] for i in test])]
        ).tocsr()
        seen = set(labels[train].tolist())
        for name, make in models.items():
            if len(seen) < 2:  # a fold whose training rows hold one outcome (a held-out site or quarter): predict it
                predicted[name][test] = next(iter(seen))
                continue
            predicted[name][test] = make().fit(x_train, labels[train]).predict(x_test)
    return {name: round(float(np.mean(predicted[name] == labels)), 4) for name in models}


def majority_share(labels: list[str]) -> float:
    """The share of the most frequent label (0 for none), rounded to 4 decimals."""
    return round(Counter(labels).most_common(1)[0][1] / len(labels), 4) if labels else 0.0


def allowed_margin(majority: float, rows: int, gates: Gates) -> float:
    """How far above the majority share an accuracy may be: the margin, or `standard_errors` standard errors of the
    majority share over the rows when that is more (chance alone moves a small release's accuracy further)."""
    noise = gates.standard_errors * math.sqrt(majority * (1 - majority) / rows) if rows else 0.0
    return round(max(gates.margin, noise), 4)


def accuracy_gate(accuracy: float | None, majority: float, rows: int, gates: Gates) -> str:
    """pass / fail against the majority share + the allowed margin; insufficient_rows below min_rows (or with one
    outcome)."""
    if accuracy is None or rows < gates.min_rows:
        return "insufficient_rows"
    return "pass" if accuracy <= majority + allowed_margin(majority, rows, gates) else "fail"


def artifact_probe(
    episodes: list[Episode], lifts: EpisodesConfig, cfg: ArtifactProbe, gates: Gates, split_by: str = "time"
) -> dict:
    """The probe over the released rows: accuracy per model, the majority share, pass / fail / insufficient_rows.

    Its folds hold out what the corpus's split plan holds out (`split_by`, the tasks manifest's split_rule.by): whole
    tasks under a time plan, whole sites under a site plan. Under a site plan no test site is ever seen in train, so a
    fold that kept a site on both sides would score what a site's id says of its outcome, which nothing trained on the
    train split can learn; the folds by task are still computed and reported (`by_task`)."""
    from threadpoolctl import threadpool_limits

    rows = sorted(
        (e for e in episodes if e.phases[-1].type == "commitment"), key=lambda e: e.id
    )  # order-free: fits see one order
    labels = np.array([e.commitment_outcome for e in rows], dtype=object)
    majority = majority_share(labels.tolist())
    result = {
        "rule": "accuracy <= majority share + margin",
        "rows": len(rows),
        "majority": majority,
        "margin": allowed_margin(majority, len(rows), gates),
        "features": list(FEATURES),
        "grouped_by": "site" if split_by == "site" else "task",
    }
    if len(rows) < gates.min_rows or len(set(labels.tolist())) < 2:
        return {
            **result,
            "status": "insufficient_rows",
            "accuracy": None,
            "model": None,
            "note": f"{len(rows)} released commitments, fewer than {gates.min_rows}"
            if len(rows) < gates.min_rows
            else "one outcome only",
        }
    texts, surfaces = [visible_text(e) for e in rows], [surface(e, lifts) for e in rows]
    groupings = {"task": [e.task_id for e in rows], "site": ["|".join(e.site_ids) for e in rows]}
    held = result["grouped_by"]
    informative = {"by_quarter": [_quarter(e) for e in rows]}
    informative |= {f"by_{name}": groups for name, groups in groupings.items() if name != held}
    with threadpool_limits(limits=1):
        accuracy = _cross_validated(texts, surfaces, labels, groupings[held], cfg)
        beside = {  # a grouping with one group has no fold to hold out (a corpus of one quarter, or one site)
            name: _cross_validated(texts, surfaces, labels, groups, cfg)
            for name, groups in informative.items()
            if len(set(groups)) >= 2
        }
    model = max(sorted(accuracy), key=lambda k: accuracy[k])
    return {
        **result,
        "status": accuracy_gate(accuracy[model], majority, len(rows), gates),
        "accuracy": accuracy[model],
        "model": model,
        "accuracy_by_model": accuracy,
        **beside,
    }
