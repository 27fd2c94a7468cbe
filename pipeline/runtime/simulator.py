"""The deterministic user simulator: a finite-state machine over one episode.

It releases a withheld slot only after a question that asks for its value (a phrase of the slot's lexicon in
configs/episodes.toml), nudges otherwise, ignores tool calls and plans, answers later questions with a fixed reply,
and after each answer moves on: next phase (revision, preference, commitment), then the
follow-ups, then the stop reply. It never says a gold value.
"""

from __future__ import annotations

from dataclasses import dataclass

from contracts.answers import AnswerForm
from contracts.episodes import Episode, EpisodesConfig
from contracts.protocol import Action, Answer, AskUser
from pipeline.tools.access import words

Lexicon = dict[str, list[tuple[str, ...]]]  # slot -> the phrases (word tuples) that ask for its value


def slot_keywords(cfg: EpisodesConfig) -> Lexicon:
    """Each slot's lexicon from configs/episodes.toml: the phrases that ask for its value, as word tuples."""
    return lexicon({slot: spec.phrases for slot, spec in cfg.slots.items()})


def lexicon(phrases: dict[str, list[str]]) -> Lexicon:
    """Slot -> the phrases that ask for it, as folded word tuples (a release carries the phrases: simulator.json)."""
    return {slot: sorted({tuple(_folded(words(p))) for p in texts}) for slot, texts in phrases.items()}


def _folded(tokens: list[str]) -> list[str]:
    return [t[:-1] if t.endswith("s") and len(t) > 3 else t for t in tokens]


def asked_slots(text: str, keywords: Lexicon) -> set[str]:
    """The slot kinds a question asks the value of: a lexicon phrase as consecutive words (case, punctuation
    and plural s ignored)."""
    tokens = _folded(words(text))
    grams: dict[int, set[tuple[str, ...]]] = {}  # the text's runs of n consecutive words, per n asked
    found = set()
    for slot, phrases in keywords.items():
        for phrase in phrases:
            n = len(phrase)
            if n not in grams:
                grams[n] = {tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)}
            if phrase in grams[n]:
                found.add(slot)
                break
    return found


def asks_for(text: str, slot: str, keywords: Lexicon) -> bool:
    """Whether a question asks for the slot's value."""
    return slot in asked_slots(text, keywords)


@dataclass(frozen=True)
class Reply:
    """What the simulated user says, and what happened: release, nudge, idle, prompt (next phase or follow-up), stop.
    A reply that opens a question carries its answer form (its sentence ends the text)."""

    text: str
    event: str
    form: AnswerForm | None = None


def step_form(episode: Episode, position: int) -> AnswerForm | None:
    """The answer form of step `position` (phases, then follow-ups); None past the last."""
    steps = [*episode.phases, *episode.follow_ups]
    return steps[position].form if position < len(steps) else None


def asking(prompt: str, form: AnswerForm) -> str:
    """The user's words opening a question: the prompt, then the one sentence of its answer form."""
    return f"{prompt} {form.sentence()}"


def words_of(message: dict) -> str:
    """A user message's words without the answer form's sentence that ends a question."""
    text, form = message.get("text") or "", message.get("answer_form")
    ending = f" {form.sentence()}" if form is not None else ""
    return text[: -len(ending)] if ending and text.endswith(ending) else text


def opening_message(episode: Episode) -> str:
    return asking(episode.initial_message, episode.phases[0].form)


class UserSimulator:
    """Plays the user of one episode. `position` counts answers: phases first, then follow-ups."""

    def __init__(self, episode: Episode, keywords: Lexicon) -> None:
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
        return opening_message(self.episode)

    @property
    def form(self) -> AnswerForm | None:
        """The answer form of the question now open (None once every question is answered)."""
        return None if self.done else step_form(self.episode, self.position)

    def respond(self, action: Action) -> Reply | None:
        """The user's reply to one agent action; None for actions the user does not see (tool calls, plans)."""
        if self.done:
            return Reply(self.episode.stop_reply, "stop")
        if isinstance(action, AskUser):
            asked = asked_slots(action.text, self.keywords)
            replies = []
            for index, slot in enumerate(
                self.episode.withheld
            ):  # one question may ask for several: each is told, a line each
                if not self.released[index] and slot.slot in asked:
                    self.released[index] = True
                    replies.append(slot.reply)
            if replies:
                return Reply("\n".join(replies), "release")
            return Reply(
                self.episode.nudge_reply if self.pending_slots else self.episode.idle_reply,
                "nudge" if self.pending_slots else "idle",
            )
        if isinstance(action, Answer):
            self.position += 1
            if self.position >= self.steps:
                self.done = True
                return Reply(self.episode.stop_reply, "stop")
            form = step_form(self.episode, self.position)
            return Reply(asking(self.prompt(self.position), form), "prompt", form)
        return None

    def prompt(self, position: int) -> str:
        """The user's words opening step `position` (0: the initial message)."""
        phases = self.episode.phases
        if position < len(phases):
            return phases[position].prompt
        return self.episode.follow_ups[position - len(phases)].prompt
