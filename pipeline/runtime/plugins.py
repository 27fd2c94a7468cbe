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

import contextlib
import importlib
import inspect
import json
import os
import queue
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from typing import Any

from pydantic import BaseModel

from contracts.agent_io import EpisodeFinish, EpisodeStart, ObservationMessage, ToolSpec
from contracts.episodes import Episode
from pipeline.core.canonical import loads_untrusted
from pipeline.core.errors import AgentFailure, PluginError
from pipeline.runtime.agents import Agent, Observation
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
    """An agent in its own process, speaking the JSON-lines protocol of contracts/agent_io.py on stdin and stdout.

    The process is started once and kept across episodes; if it dies, the next episode starts a new one. A process
    that exits, or stays silent past `timeout` seconds on a turn, is an AgentFailure carrying the tail of its stderr:
    the runner records agent_error and ends that episode. A line that is not JSON is the agent's own output error
    (parse_error), as for any agent."""

    def __init__(self, command: str, timeout: float = 60.0, stderr_lines: int = 20) -> None:
        self.command, self.timeout, self.name = command, timeout, f"cmd:{command}"
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
        self.process: subprocess.Popen | None = None
        self.lines: queue.Queue = queue.Queue()
        self.stderr: deque[str] = deque(maxlen=stderr_lines)

    # ------------------------------------------------------------------ process
    def _spawn(self) -> None:
        try:
            self.process = subprocess.Popen(
                self.argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                encoding="utf-8",
                errors="replace",
                bufsize=1,
                start_new_session=True,
            )  # its own process group: wrappers' children go too
        except OSError as exc:
            raise PluginError(f"--agent-cmd {self.command!r}: cannot start it ({exc})") from exc
        self.lines = queue.Queue()
        self.stderr.clear()
        threading.Thread(target=self._pump, args=(self.process.stdout, self.lines), daemon=True).start()
        self.drain = threading.Thread(target=self._drain, args=(self.process.stderr, self.stderr), daemon=True)
        self.drain.start()

    @staticmethod
    def _pump(stream: Any, lines: queue.Queue) -> None:
        for line in stream:
            lines.put(line)
        lines.put(None)  # end of output: the process exited or closed stdout

    @staticmethod
    def _drain(stream: Any, tail: deque) -> None:
        for line in stream:
            tail.append(line.rstrip("\n"))

    def _alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def _tail(self) -> str:
        if getattr(self, "drain", None) is not None:
            self.drain.join(timeout=1)  # what it wrote before it died
        text = " | ".join(line for line in tuple(self.stderr) if line.strip())
        return f"; stderr: {text[-600:]}" if text else "; no stderr"

    def _failure(self, what: str) -> AgentFailure:
        self._stop()
        return AgentFailure(f"agent process {what}{self._tail()}")

    def _skip_stale(self) -> None:
        """Lines written since the last reply (a banner, a reply to episode_end) are not the next action."""
        while True:
            try:
                line = self.lines.get_nowait()
            except queue.Empty:
                return
            if line is None:  # the end of its output: keep it for the reader
                self.lines.put(None)
                return

    def _send(self, message: BaseModel) -> None:
        if not self._alive():
            raise self._failure(f"exited with code {self.process.returncode if self.process else None}")
        try:
            self.process.stdin.write(message.model_dump_json() + "\n")
            self.process.stdin.flush()
        except (BrokenPipeError, OSError) as exc:
            raise self._failure(f"closed its input ({exc})") from exc

    def _stop(self) -> None:
        if self.process is None:
            return
        if self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGKILL)  # the whole group: `uv run`, shell wrappers, their children
            except OSError:
                self.process.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=5)

    # ------------------------------------------------------------------ agent interface
    def start(self, episode: Episode) -> None:
        if not self._alive():
            self._spawn()
        self.started = episode_start(episode)
        self.pending_start = True

    def act(self, observation: Observation) -> Any:
        if self.pending_start:  # sent with the first observation, so that a failure is recorded as a turn
            self.pending_start = False
            self._send(self.started)
        self._skip_stale()
        self._send(ObservationMessage(**observation.view().model_dump()))
        deadline = time.monotonic() + self.timeout
        line = ""
        while not line.strip():  # blank lines are not actions
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise self._failure(f"sent no action within {self.timeout:g} s (--turn-timeout)") from None
            if line is None:
                try:
                    self.process.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    raise self._failure("closed its output but kept running") from None
                raise self._failure(f"exited with code {self.process.returncode}")
        try:
            return loads_untrusted(line)
        except json.JSONDecodeError:
            return {"unparsed": line.rstrip("\n")}

    def finish(self, end: Any) -> None:
        if self._alive():
            with contextlib.suppress(AgentFailure):
                self._send(_finish(end))

    def close(self) -> None:
        if self._alive():
            try:
                self.process.stdin.close()
                self.process.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self._stop()
