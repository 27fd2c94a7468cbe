"""The process of an agent that runs apart (`run --agent-cmd`): started in a session of its own, written to by a
thread of its own (an agent that reads nothing cannot block the runner), read one bounded line at a time (an agent that
writes without end cannot fill the runner's memory), and stopped with every process it started, those that left its
process group or session included (found through /proc, where there is one, by the mark it leaves in their
environment)."""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import subprocess
import threading
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from contracts.agent_io import MAX_ACTION_LINE_BYTES

CHUNK = 1 << 16  # bytes read from a pipe at a time
BACKLOG = 8  # lines read ahead, and messages waiting to be written: the memory a process can hold is bounded by these
STDERR_LINE = 500  # characters of a stderr line kept for the failure message


@dataclass(frozen=True)
class Oversized:
    """A line longer than the limit: its first bytes; the runner read no more of it."""

    head: bytes
    limit: int


class _Closing:
    """The writer's last message: close the process's input once what was queued before is written."""


CLOSE = _Closing()


def split_lines(
    read: Callable[[], bytes], emit: Callable[[bytes | Oversized], None], limit: int, head: int = 200
) -> None:
    """Read chunks until `read` returns b"" and emit each line (without its newline), holding at most `limit` bytes
    (plus a chunk) of one line: a longer one is emitted once, as Oversized with its first `head` bytes, as soon as it
    passes the limit, and the rest of it up to its newline is dropped. A last line without a newline is emitted too."""
    buffer, dropping = bytearray(), False
    while chunk := read():
        start = 0
        while start < len(chunk):
            cut = chunk.find(b"\n", start)
            end = len(chunk) if cut < 0 else cut
            if not dropping:
                buffer += chunk[start:end]
                if len(buffer) > limit:
                    emit(Oversized(bytes(buffer[:head]), limit))
                    buffer.clear()
                    dropping = True
            if cut < 0:
                break
            if not dropping:
                emit(bytes(buffer))
            buffer.clear()
            dropping = False
            start = cut + 1
    if buffer and not dropping:
        emit(bytes(buffer))


MARK = "TELEMETRY_BENCH_AGENT_PROCESS"  # set in an agent's environment: every process that inherits it is the agent's


def _chunks(fd: int) -> Callable[[], bytes]:
    """What split_lines reads a pipe with: a chunk at a time, b"" at its end (or once it is closed under it)."""

    def chunk() -> bytes:
        try:
            return os.read(fd, CHUNK)
        except OSError:
            return b""

    return chunk


def _process_table() -> dict[int, tuple[int, int, int, int]]:
    """pid -> (parent pid, process group, session, start time) of every living process /proc shows (not zombies, which
    nothing can kill and which have no children; {} without /proc)."""
    table = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return table
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as handle:
                stat = handle.read()
            fields = stat[stat.rindex(b")") + 2 :].split()  # after the command name, which may hold anything
            if fields[0] != b"Z":
                table[int(name)] = (int(fields[1]), int(fields[2]), int(fields[3]), int(fields[19]))
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile
    return table


def _marked(pid: int, mark: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            return mark in handle.read().split(b"\0")
    except OSError:  # gone, or another user's
        return False


class ProcessTree:
    """Every process an agent started: those in its session or process group, those that inherited its mark (MARK in
    their environment: also a child that left its group and session and whose parent exited), and the descendants of
    all of them. Its own pid counts while it is the agent's (by start time), so that a reused pid is never taken for
    it; its group and session ids, which outlive it while members are left, only while no other process has its pid."""

    def __init__(self, root: int, mark: str) -> None:
        self.root, self.mark = root, f"{MARK}={mark}".encode()
        table = _process_table()
        self.start = table[root][3] if root in table else None  # None: it exited already
        self.reused = False  # another process has its pid now

    def members(self) -> set[int]:
        """The living members, as /proc shows them now (none without /proc)."""
        table = _process_table()
        self.reused = reused = self.root in table and table[self.root][3] != self.start
        found = {
            pid
            for pid, (_, group, session, _) in table.items()
            if (not reused and self.root in (pid, group, session)) or _marked(pid, self.mark)
        }
        children: dict[int, list[int]] = {}
        for pid, (parent, *_) in table.items():
            children.setdefault(parent, []).append(pid)
        stack = list(found)
        while stack:
            for child in children.get(stack.pop(), ()):
                if child not in found:
                    found.add(child)
                    stack.append(child)
        found.discard(os.getpid())
        return found

    def kill(self) -> None:
        """SIGKILL the whole tree until none of it is left (a few rounds: a member may fork while the others die).
        Without /proc, the process group alone."""
        for _ in range(3):
            members = self.members()
            if not self.reused:
                with contextlib.suppress(OSError):
                    os.killpg(self.root, signal.SIGKILL)  # the group at once: no other group has its id
            if not members:
                return
            for pid in members:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)


class AgentProcess:
    """One running agent process: lines in, lines out, stderr's tail kept for failure messages."""

    def __init__(self, argv: list[str], line_limit: int = MAX_ACTION_LINE_BYTES, stderr_lines: int = 20) -> None:
        mark = uuid.uuid4().hex
        self.process = subprocess.Popen(
            argv,
            env={**os.environ, MARK: mark},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            bufsize=0,
            start_new_session=True,  # its own session and process group: wrappers' children go too
        )
        self.tree = ProcessTree(self.process.pid, mark)
        self.line_limit = line_limit
        self.lines: queue.Queue = queue.Queue(maxsize=BACKLOG)
        self.outbox: queue.Queue = queue.Queue(maxsize=BACKLOG)
        self.stderr: deque[str] = deque(maxlen=stderr_lines)
        self.write_error: OSError | None = None
        self.writing = False
        self.stopped = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._write, daemon=True).start()
        self.drain = threading.Thread(target=self._drain, daemon=True)
        self.drain.start()

    # ------------------------------------------------------------------ threads
    def _keep(self, item: bytes | Oversized | None) -> None:
        """Hand a line to the reader of `lines`, waiting while it is full, unless the process was stopped."""
        while not self.stopped.is_set():
            try:
                self.lines.put(item, timeout=0.2)
                return
            except queue.Full:
                continue

    def _read(self) -> None:
        try:
            split_lines(_chunks(self.process.stdout.fileno()), self._keep, self.line_limit)
        finally:
            self._keep(None)  # the end of its output: it exited or closed stdout
            self.process.stdout.close()

    def _write(self) -> None:
        stdin = self.process.stdin
        while True:
            item = self.outbox.get()
            if item is CLOSE or self.stopped.is_set():
                break
            self.writing = True
            try:
                view = memoryview(item)
                while view:
                    view = view[stdin.write(view) :]
            except OSError as exc:  # it closed its input, or was stopped while the runner wrote
                self.write_error = exc
                break
            finally:
                self.writing = False
        with contextlib.suppress(OSError):
            stdin.close()

    def _drain(self) -> None:
        def keep(line: bytes | Oversized) -> None:
            text = line.head if isinstance(line, Oversized) else line
            self.stderr.append(text[:STDERR_LINE].decode("utf-8", "replace"))

        split_lines(_chunks(self.process.stderr.fileno()), keep, STDERR_LINE, STDERR_LINE)
        self.process.stderr.close()

    # ------------------------------------------------------------------ use
    def alive(self) -> bool:
        return self.process.poll() is None

    def send(self, data: bytes, timeout: float) -> bool:
        """Queue a message for the process; False when the queue stayed full for `timeout` seconds (it reads
        nothing)."""
        try:
            self.outbox.put(data, timeout=max(0.0, timeout))
            return True
        except queue.Full:
            return False

    def unread(self) -> bool:
        """Whether the process has input waiting that it has not read."""
        return self.writing or not self.outbox.empty()

    def skip_stale(self) -> None:
        """Drop lines already read (a banner, a reply to episode_end): they are not the next action."""
        while True:
            try:
                line = self.lines.get_nowait()
            except queue.Empty:
                return
            if line is None:  # the end of its output: kept for the reader
                self.lines.put(None)
                return

    def stderr_tail(self) -> str:
        self.drain.join(timeout=1)  # what it wrote before it died
        text = " | ".join(line.rstrip("\r") for line in tuple(self.stderr) if line.strip())
        return f"; stderr: {text[-600:]}" if text else "; no stderr"

    def close(self, grace: float = 5.0) -> None:
        """Close its input once what was queued is written, give it `grace` seconds to exit, then stop it."""
        with contextlib.suppress(queue.Full):
            self.outbox.put(CLOSE, timeout=min(grace, 1.0))
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=grace)
        self.stop()

    def stop(self) -> None:
        """Kill the process and every process it started, living or left behind, and reap it."""
        self.stopped.set()
        self.tree.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=5)
        with contextlib.suppress(queue.Full):
            self.outbox.put_nowait(CLOSE)  # wake an idle writer
