"""Agents brought by users (docs/agents.md): a Python class (`--agent module:factory`) or a process in any language
(`--agent-cmd "CMD"`, JSON lines on stdin and stdout). Both see the agent view only (contracts.agent_view), never
the episode's golds, and return actions of contracts.protocol.

The documented protocol of a Python agent (duck-typed; only `act` is required):

    class MyAgent:
        def start(self, episode: EpisodeStart) -> None: ...            # optional: a new episode begins
        def act(self, observation: AgentObservation) -> dict | Action: ...   # one action per turn
        def finish(self, end: EpisodeFinish) -> None: ...              # optional: the episode is over
        def close(self) -> None: ...                                   # optional: the run is over
"""

from __future__ import annotations

import importlib
import inspect
import json
import os
import queue
import shlex
import shutil
import subprocess
import sys
import time
from typing import Any

from pydantic import BaseModel

from contracts.agent_io import EpisodeFinish, EpisodeStart, ObservationMessage, ToolSpec
from contracts.episodes import Episode
from pipeline.core.canonical import JSONTooDeep, JSONValueError, loads_untrusted
from pipeline.core.errors import AgentFailure, PluginError
from pipeline.runtime.agents import Agent, Observation, unparsed
from pipeline.runtime.processes import AgentProcess, Oversized
from pipeline.tools import registry

ACTION_KINDS = ["ask_user", "call_tool", "answer", "plan"]


def episode_start(episode: Episode) -> EpisodeStart:
    """What an agent is told when an episode begins: its id, corpus, split, budget and the tools; no golds."""
    return EpisodeStart(
        episode_id=episode.id,
        corpus=episode.corpus,
        split=episode.split,
        budget=episode.turn_budget,
        tools=[ToolSpec(name=t.name, description=t.description, input_schema=t.input_schema()) for t in registry.TOOLS],
        actions=ACTION_KINDS,
    )


def _finish(end: Any) -> EpisodeFinish:
    return EpisodeFinish(episode_id=end.episode_id, turns=end.turns, stopped=end.stopped)


def as_action(output: Any) -> Any:
    """An agent's output as the runner takes it: models dumped to dicts; dicts and lists of them as they are."""
    if isinstance(output, BaseModel):
        return output.model_dump(mode="json")
    if isinstance(output, list):
        return [as_action(item) for item in output]
    return output


class PythonAgent(Agent):
    """A user's Python agent behind the runner's interface: it is given the agent view, never the episode."""

    def __init__(self, plugin: Any, name: str) -> None:
        self.plugin, self.name = plugin, name

    def start(self, episode: Episode) -> None:
        if hasattr(self.plugin, "start"):
            self.plugin.start(episode_start(episode))

    def act(self, observation: Observation) -> Any:
        return as_action(self.plugin.act(observation.view()))

    def finish(self, end: Any) -> None:
        if hasattr(self.plugin, "finish"):
            self.plugin.finish(_finish(end))

    def close(self) -> None:
        if hasattr(self.plugin, "close"):
            self.plugin.close()


def load_python_agent(spec: str, options: dict[str, Any] | None = None) -> PythonAgent:
    """`module:factory` -> the agent the factory returns when called with the options as keyword arguments. The
    module is imported from the current folder or the environment."""
    module_name, _, factory_name = spec.partition(":")
    if not module_name or not factory_name:
        raise PluginError(
            f"--agent {spec!r}: give a Python agent as module:factory (e.g. examples.agents.replay:ReplayAgent)"
        )
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise PluginError(
            f"--agent {spec!r}: cannot import {module_name!r} from the current folder or the environment ({exc})"
        ) from exc
    except Exception as exc:  # the user's module itself fails to load (SyntaxError, an error at import time)
        raise PluginError(f"--agent {spec!r}: importing {module_name!r} failed: {type(exc).__name__}: {exc}") from exc
    factory = getattr(module, factory_name, None)
    if not callable(factory):
        raise PluginError(f"--agent {spec!r}: module {module_name!r} has no callable {factory_name!r}")
    try:
        inspect.signature(factory).bind(**(options or {}))
    except TypeError as exc:
        raise PluginError(
            f"--agent {spec!r}: {factory_name}() does not take the options given ({exc}); pass them as --agent-option "
            f"KEY=VALUE"
        ) from exc
    except ValueError:
        pass  # no signature to check (a builtin): the call says
    try:
        plugin = factory(**(options or {}))
    except Exception as exc:
        raise PluginError(f"--agent {spec!r}: {factory_name}() failed: {type(exc).__name__}: {exc}") from exc
    if not callable(getattr(plugin, "act", None)):
        raise PluginError(
            f"--agent {spec!r}: {factory_name}() returned {type(plugin).__name__}, which has no act(observation) method"
        )
    return PythonAgent(plugin, spec)


class CommandAgent(Agent):
    """An agent in its own process, speaking the JSON-lines protocol of contracts/agent_io.py on stdin and stdout
    (pipeline.runtime.processes runs it: never blocked on, bounded in what it may write, stopped with its children).

    The process is started once and kept across episodes; if it dies, the next episode starts a new one. A process
    that exits, or stays silent past `timeout` seconds on a turn, is an AgentFailure carrying the tail of its stderr:
    the runner records agent_error, stops it with every process it started, and ends that episode. A line that is not
    JSON, not UTF-8, not Unicode text or longer than MAX_ACTION_LINE_BYTES is the agent's own output error
    (parse_error), as for any agent."""

    def __init__(self, command: str, timeout: float = 60.0, stderr_lines: int = 20) -> None:
        self.command, self.timeout, self.name = command, timeout, f"cmd:{command}"
        self.stderr_lines = stderr_lines
        try:
            self.argv = shlex.split(command)
        except ValueError as exc:
            raise PluginError(f"--agent-cmd {command!r}: cannot split it into words ({exc}); check its quotes") from exc
        if not self.argv:
            raise PluginError(
                "--agent-cmd is empty: give the command that starts the agent, e.g. --agent-cmd 'python my_agent.py'"
            )
        if shutil.which(self.argv[0]) is None:
            raise PluginError(
                f"--agent-cmd {command!r}: cannot start it ({self.argv[0]!r} is not an executable on PATH or a path)"
            )
        self.process: AgentProcess | None = None

    # ------------------------------------------------------------------ process
    def _spawn(self) -> None:
        if self.process is not None:
            self.process.stop()  # what is left of the last one: its children, a process that closed its output
        try:
            self.process = AgentProcess(self.argv, stderr_lines=self.stderr_lines)
        except OSError as exc:
            raise PluginError(f"--agent-cmd {self.command!r}: cannot start it ({exc})") from exc

    def _alive(self) -> bool:
        return self.process is not None and self.process.alive()

    def _failure(self, what: str) -> AgentFailure:
        self.process.stop()
        return AgentFailure(f"agent process {what}{self.process.stderr_tail()}")

    def _send(self, message: BaseModel, deadline: float) -> None:
        if self.process.write_error is not None:
            raise self._failure(f"closed its input ({self.process.write_error})")
        if not self._alive():
            raise self._failure(f"exited with code {self.process.process.returncode}")
        if not self.process.send(message.model_dump_json().encode("utf-8") + b"\n", deadline - time.monotonic()):
            raise self._failure(f"read none of its input within {self.timeout:g} s (--turn-timeout)")

    def _receive(self, deadline: float) -> bytes | Oversized:
        """The next line that is not blank, within the turn's time."""
        while True:
            try:
                line = self.process.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                unread = " and read none of its input" if self.process.unread() else ""
                raise self._failure(f"sent no action{unread} within {self.timeout:g} s (--turn-timeout)") from None
            if line is None:
                try:
                    self.process.process.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    raise self._failure("closed its output but kept running") from None
                raise self._failure(f"exited with code {self.process.process.returncode}")
            if isinstance(line, Oversized) or line.strip():  # blank lines are not actions
                return line

    # ------------------------------------------------------------------ agent interface
    def start(self, episode: Episode) -> None:
        if not self._alive():
            self._spawn()
        self.started = episode_start(episode)
        self.pending_start = True

    def act(self, observation: Observation) -> Any:
        deadline = time.monotonic() + self.timeout
        if self.pending_start:  # sent with the first observation, so that a failure is recorded as a turn
            self.pending_start = False
            self._send(self.started, deadline)
        self.process.skip_stale()
        self._send(ObservationMessage(**observation.view().model_dump()), deadline)
        return read_action(self._receive(deadline))

    def finish(self, end: Any) -> None:
        if self._alive() and self.process.write_error is None:
            self.process.send(_finish(end).model_dump_json().encode("utf-8") + b"\n", 0.0)  # no room: it reads nothing

    def close(self) -> None:
        if self.process is not None:
            self.process.close()


def read_action(line: bytes | Oversized) -> Any:
    """An agent's output line as the runner takes it: JSON checked where it enters (contracts.agent_io); a line that
    is not is kept for the trace, unparsed, with why when it looked like JSON."""
    if isinstance(line, Oversized):
        head = line.head.decode("utf-8", "backslashreplace")
        return unparsed(
            f"{head}...", f"a line longer than {line.limit} bytes (MAX_ACTION_LINE_BYTES): the rest of it was discarded"
        )
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        return unparsed(line.decode("utf-8", "backslashreplace"), f"not UTF-8 ({exc.reason} at byte {exc.start})")
    text = text.rstrip("\r")
    try:
        return loads_untrusted(text)
    except (JSONTooDeep, JSONValueError) as exc:
        return unparsed(text, str(exc))
    except json.JSONDecodeError:
        return {"unparsed": text}
