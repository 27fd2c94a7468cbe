"""A quality-blind agent and an always-answer agent, each in its own process speaking the JSON-lines protocol
(docs/agents.md), on every shipped corpus's test split (issue 43): each does all the work right, as the oracle's
trace does, but commits without reading a quality result. With the released mix at 0.4 / 0.3 / 0.3 they score at most
the answer share + 0.05, and `score --json` shows their balanced commitment accuracy at most 0.40."""

from __future__ import annotations

import json
import shlex
import sys

import pytest

from pipeline.core.config import load_audit_config, load_episodes_config
from pipeline.core.workspace import Workspace
from tests.helpers import REPO, run_cli

WS = Workspace.from_root(REPO)
LIFTS, AUDIT = load_episodes_config(WS), load_audit_config(WS)
CORPORA = ["hhw", "xai4heat", "ucam", "pvdaq", "daiad"]

# The agent replays the oracle's actions (everything right), except the commitment: "answer" always, or the
# majority outcome of the train release (what a user sees of it), with a reason that fits the decision (the oracle's
# when the decision is the oracle's, the most permissive one for it otherwise), also in the rationale follow-up.
AGENT = r"""
import collections, json, sys

trace, train, mode = sys.argv[1:4]
actions = collections.defaultdict(list)
for line in open(trace, encoding="utf-8"):
    record = json.loads(line)
    if record.get("type") == "turn" and record.get("run") == 0 and record.get("action"):
        actions[record["episode_id"]].append(record["action"])
outcomes = collections.Counter(json.loads(line)["commitment_outcome"] for line in open(train, encoding="utf-8"))
majority = max(sorted(outcomes), key=lambda o: outcomes[o])
decision = "answer" if mode == "always_answer" else majority
fallback = {"answer": "healthy_quality", "abstain": "long_gap", "re_clarify": "marginal_quality"}
queue, reason = [], None
for line in sys.stdin:
    message = json.loads(line)
    if message["type"] == "episode_start":
        queue, reason = list(actions[message["episode_id"]]), None
    elif message["type"] == "observation":
        action = queue.pop(0) if queue else {"kind": "answer", "text": "done", "fields": {}}
        fields = action.get("fields") or {}
        if action.get("kind") == "answer" and "decision" in fields:
            reason = fields["reason"] if fields["decision"] == decision else fallback[decision]
            action = {**action, "fields": {"decision": decision, "reason": reason}}
        elif action.get("kind") == "answer" and set(fields) == {"reason"} and reason is not None:
            action = {**action, "fields": {"reason": reason}}
        sys.stdout.write(json.dumps(action) + "\n")
        sys.stdout.flush()
"""


@pytest.mark.parametrize("corpus", CORPORA)
def test_quality_blind_and_always_answer_agents_score_at_most_the_answer_share(real_artifacts, tmp_path, corpus):
    oracle = tmp_path / "oracle.jsonl"
    played = run_cli(real_artifacts, "run", "--corpus", corpus, "--split", "test", "--agent", "oracle", "--out",
                     str(oracle))  # fmt: skip
    assert played.exit_code == 0, played.output
    script = tmp_path / "blind_agent.py"
    script.write_text(AGENT, encoding="utf-8")
    train = real_artifacts / corpus / "release" / "train.jsonl"
    bound = LIFTS.outcome_shares["answer"] + AUDIT.gates.majority_margin
    for mode in ("quality_blind", "always_answer"):
        out = tmp_path / f"{mode}.jsonl"
        command = " ".join(shlex.quote(str(w)) for w in (sys.executable, script, oracle, train, mode))
        result = run_cli(real_artifacts, "run", "--corpus", corpus, "--split", "test", "--agent-cmd", command,
                         "--out", str(out))  # fmt: skip
        assert result.exit_code == 0, result.output
        scored = run_cli(real_artifacts, "score", str(out), "--json")
        assert scored.exit_code == 0, scored.output
        summary = json.loads(scored.output)["summaries"][0]
        rows = [json.loads(line) for line in (real_artifacts / corpus / "release" / "test.jsonl").open()]
        answers = sum(r["commitment_outcome"] == "answer" for r in rows) / len(rows)
        # one row of slack where one row is more than the margin (a test split of a few rows)
        allowed = bound + max(0.0, 1 / len(rows) - AUDIT.gates.majority_margin)
        assert summary["accomplished_rate"] <= allowed, (corpus, mode, summary["accomplished_rate"], answers)
        # the balanced commitment accuracy shows it at a glance: right on one outcome, wrong on the others
        assert summary["balanced_commitment_accuracy"] <= 0.40, (corpus, mode, summary["commitment_accuracy"])
        if mode == "always_answer":  # it wins exactly the answer rows: the work is right, only quality is unread
            assert summary["accomplished_rate"] == pytest.approx(answers, abs=1e-4), (corpus, summary)
