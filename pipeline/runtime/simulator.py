"""The deterministic user simulator: a finite-state machine over one episode.

It releases a withheld slot only after a question that asks for it (keyword classifier),
nudges otherwise, ignores tool calls and plans, answers later questions with a fixed reply,
and after each answer moves on: next phase (revision, preference, commitment), then the
follow-ups, then the stop reply. It never says a gold value.
"""

from __future__ import annotations

from dataclasses import dataclass

from contracts.episodes import Episode, EpisodesConfig
from contracts.protocol import Action, Answer, AskUser
from pipeline.tools.access import words


def slot_keywords(cfg: EpisodesConfig) -> dict[str, set[str]]:
    """Keywords per slot from configs/episodes.toml: a question asks for a slot when one is a word of it."""
    return {slot: {k.lower() for k in spec.keywords} for slot, spec in cfg.slots.items()}


def asks_for(text: str, slot: str, keywords: dict[str, set[str]]) -> bool:
    """Whether a question asks for the slot: case and punctuation ignored, whole words, plural 's' folded."""
    wanted = keywords[slot]
    tokens = set(words(text))
    tokens |= {t[:-1] for t in tokens if t.endswith("s") and len(t) > 3}
    return bool(tokens & wanted)


@dataclass(frozen=True)
class Reply:
    """What the simulated user says, and what happened: release, nudge, idle, prompt (next phase or follow-up), stop."""

    text: str
    event: str


class UserSimulator:
    """Plays the user of one episode. `position` counts answers: phases first, then follow-ups."""

    def __init__(self, episode: Episode, keywords: dict[str, set[str]]) -> None:
        self.episode = episode
        self.keywords = keywords
        self.released = [False] * len(episode.withheld)
        self.position = 0
        self.done = False

    @property
    def steps(self) -> int:
        return len(self.episode.phases) + len(self.episode.follow_ups)

    @property
    def pending_slots(self) -> list[str]:
        return [w.slot for w, done in zip(self.episode.withheld, self.released, strict=True) if not done]

    def opening(self) -> str:
        return self.episode.initial_message

    def respond(self, action: Action) -> Reply | None:
        """The user's reply to one agent action; None for actions the user does not see (tool calls, plans)."""
        if self.done:
            return Reply(self.episode.stop_reply, "stop")
        if isinstance(action, AskUser):
            for index, slot in enumerate(self.episode.withheld):
                if not self.released[index] and asks_for(action.text, slot.slot, self.keywords):
                    self.released[index] = True
                    return Reply(slot.reply, "release")
            return Reply(self.episode.nudge_reply if self.pending_slots else self.episode.idle_reply,
                         "nudge" if self.pending_slots else "idle")
        if isinstance(action, Answer):
            self.position += 1
            if self.position >= self.steps:
                self.done = True
                return Reply(self.episode.stop_reply, "stop")
            return Reply(self.prompt(self.position), "prompt")
        return None

    def prompt(self, position: int) -> str:
        """The user's words opening step `position` (0: the initial message)."""
        phases = self.episode.phases
        if position < len(phases):
            return phases[position].prompt
        return self.episode.follow_ups[position - len(phases)].prompt
