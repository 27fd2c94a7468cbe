"""Fixture episodes for positive controls that released rows must not contain (design/VALIDITY.md section 4)."""

from __future__ import annotations

from collections.abc import Callable

from contracts.episodes import Episode, EpisodesConfig, WithheldSlot
from pipeline.tasks import render
from pipeline.tools.access import ToolStore


def both_withheld(
    candidates: list[Episode],
    store: ToolStore,
    lifts: EpisodesConfig,
    solvable: Callable[[Episode], bool] = lambda e: True,
) -> Episode | None:
    """A candidate that withholds the time, made to withhold the site too: its opening names the point without the
    site (the local phrase), and the site is told when asked. Released rows withhold one slot at most; here the one
    question naming every slot kind is the right one. The first candidate (by id) that lends itself and that
    `solvable` accepts as it is (a capable solver wins it); None when there is none."""
    for episode in sorted(candidates, key=lambda e: e.id):
        if (
            [w.slot for w in episode.withheld] != ["time"]
            or len(episode.site_ids) != 1
            or not episode.evidence_stream_ids
        ):
            continue
        label = store.sites[episode.site_ids[0]]["label"]
        stream = (
            store.streams.get(episode.phases[0].evidence_stream_ids[0])
            if episode.phases[0].evidence_stream_ids
            else None
        )
        if stream is None or stream["site_id"] != episode.site_ids[0]:
            continue
        phrase = render.point_phrase(stream["label"])
        local = render.local_phrase(phrase, label)
        if local == phrase or episode.initial_message.count(phrase) != 1:
            continue
        opening = episode.initial_message.replace(phrase, local)
        if label.lower() in opening.lower() or not solvable(episode):
            continue
        site = WithheldSlot(
            slot="site", value=label, reply=render.query([lifts.slots["site"].reply], 0, {"site_label": label})
        )
        obligations = ["clarify_site", *episode.obligations]
        return episode.model_copy(
            update={
                "id": f"{episode.id}.both_withheld",
                "initial_message": opening,
                "withheld": [site, *episode.withheld],
                "obligations": obligations,
                "interaction_mode": "+".join(obligations),
                "turn_budget": episode.turn_budget + 1,
            }
        )
    return None
