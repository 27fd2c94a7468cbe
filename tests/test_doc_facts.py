"""The figures README.md and docs/ quote from the build are the build's (issue 54: "the four shipped corpora" when
five built, a test split of 45/8/10 episodes when it held 13/8/8): each is marked in the Markdown source and checked
against the session's own build of every shipped corpus."""

from __future__ import annotations

import shutil

from pipeline.harness.doc_facts import MARKER, documents, facts, stale, write
from tests.helpers import REPO, SHIPPED


def test_every_marked_figure_is_the_builds(real_artifacts):
    assert stale(REPO, real_artifacts) == []
    known = facts(real_artifacts)
    assert known["corpora.released"] == str(len(SHIPPED))
    marked = {m.group(1) for path in documents(REPO) for m in MARKER.finditer(path.read_text(encoding="utf-8"))}
    # the claims the issue found drifting are among them
    assert {"corpora.released_word", "xai4heat.test.answer", "xai4heat.test.always_answer"} <= marked


def test_a_figure_the_build_does_not_produce_fails_and_make_docs_fixes_it(real_artifacts, tmp_path):
    root = tmp_path / "project"
    (root / "docs").mkdir(parents=True)
    shutil.copy(REPO / "README.md", root / "README.md")
    shutil.copy(REPO / "docs" / "runtime.md", root / "docs" / "runtime.md")
    runtime = root / "docs" / "runtime.md"
    known = facts(real_artifacts)
    text = runtime.read_text(encoding="utf-8")
    quoted = f"<!--fact:xai4heat.test.answer-->{known['xai4heat.test.answer']}<!--/fact-->"
    assert quoted in text
    runtime.write_text(text.replace(quoted, "<!--fact:xai4heat.test.answer-->45<!--/fact-->"), encoding="utf-8")
    (problem,) = stale(root, real_artifacts)
    assert problem.startswith("docs/runtime.md:") and "xai4heat.test.answer is quoted as '45'" in problem
    assert write(root, real_artifacts) == [runtime] and stale(root, real_artifacts) == []
    assert runtime.read_text(encoding="utf-8") == text
    runtime.write_text(text + "\n<!--fact:xai4heat.test.guess-->1<!--/fact-->\n", encoding="utf-8")
    assert any("names no fact of this build" in p for p in stale(root, real_artifacts))
