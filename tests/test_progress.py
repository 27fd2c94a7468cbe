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
