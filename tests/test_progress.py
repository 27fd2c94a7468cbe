"""Progress on a terminal, silence in CI logs (issue 54: the audit and the report step waited silently for tens of
seconds): bars of threads working at once share one display, which goes when the last bar ends."""

from __future__ import annotations

import threading

from pipeline.core import progress


def test_no_bar_in_ci_logs(monkeypatch, capsys):
    monkeypatch.setenv("CI", "true")
    assert not progress.watched()
    with progress.bar("audit", 3) as bar:
        for _ in range(3):
            bar.advance()
    assert capsys.readouterr() == ("", "") and progress._display is None


def test_bars_of_threads_share_one_display_while_any_is_open(monkeypatch):
    monkeypatch.setattr(progress, "watched", lambda: True)
    opened, release = threading.Barrier(3), threading.Event()
    seen = []

    def work(name: str) -> None:
        with progress.bar(f"{name} audit", 2) as bar:
            bar.advance()
            opened.wait(timeout=30)
            release.wait(timeout=30)
            bar.advance()
            seen.append(progress._display.tasks[-1].total if progress._display else None)

    threads = [threading.Thread(target=work, args=(name,)) for name in ("hhw", "xai4heat")]
    for thread in threads:
        thread.start()
    opened.wait(timeout=30)
    display = progress._display
    assert display is not None and sorted(t.description for t in display.tasks) == ["hhw audit", "xai4heat audit"]
    assert [t.completed for t in display.tasks] == [1, 1]
    release.set()
    for thread in threads:
        thread.join(timeout=30)
    assert progress._display is None and len(seen) == 2  # the display ended with the last bar


def test_bars_of_a_spawned_build_worker_are_drawn_by_its_build(monkeypatch):
    """A worker's bars and tracked loops go to its build as events; the build draws them on its own display, where
    each bar shows the worker's steps and goes when the worker closes it (or when the worker ended without)."""
    import queue

    sent: queue.Queue = queue.Queue()
    monkeypatch.setattr(progress, "_sink", None)
    progress.relay_to(sent)
    with progress.bar("hhw audit", 3) as bar:
        bar.advance()
        bar.advance(2)
    assert list(progress.track(["a", "b"], "hhw tasks")) == ["a", "b"]
    with progress.bar("xai4heat audit", 5) as bar:  # a worker killed before it closed its bar
        bar.advance()
    progress.relay_to(None)
    events = [sent.get_nowait() for _ in range(sent.qsize())][:-1]  # the last bar's close is lost with its worker
    kinds = [event[0] for event in events]
    assert kinds == ["open", "advance", "advance", "close", "open", "advance", "advance", "close", "open", "advance"]
    monkeypatch.setattr(progress, "watched", lambda: True)
    drawn = progress.Relayed()
    seen = []
    for event in events:
        drawn.handle(event)
        display = progress._display
        seen.append([(t.description, t.total, t.completed) for t in display.tasks] if display else None)
    assert seen[2] == [("hhw audit", 3, 3)] and seen[3] is None
    assert seen[6] == [("hhw tasks", 2, 2)]
    assert seen[-1] == [("xai4heat audit", 5, 1)]
    drawn.close()
    assert progress._display is None
