#!/usr/bin/env python3
"""An agent in its own process for `telemetry-bench run --agent-cmd` (docs/agents.md), using nothing but the
standard library: it reads the runner's JSON lines on stdin and writes one action per observation on stdout.
It replays a trace's actions (e.g. the oracle's), since the agent view holds no golds.

    telemetry-bench run --corpus xai4heat --split test --agent-cmd "python examples/agents/replay_cmd.py /tmp/oracle.jsonl"

Protocol (contracts/agent_io.py; schemas in contracts/schemas/agent_input.schema.json and agent_output.schema.json):
  {"type": "episode_start", "episode_id": ..., "tools": [...], ...}   no reply
  {"type": "observation", "messages": [...], "answer_form": ..., ...} reply with one action, one line
  {"type": "episode_end", "episode_id": ..., "turns": ..., "stopped": ...}   no reply
Write logs to stderr: stdout carries actions only.
"""  # noqa: E501 - the examples are runnable commands, one per line

import json
import sys


def load(trace):
    actions = {}
    with open(trace, encoding="utf-8") as handle:
        for line in handle:
            record = json.loads(line)
            if record.get("type") == "turn" and record.get("run") == 0 and record.get("action"):
                actions.setdefault(record["episode_id"], []).append(record["action"])
    return actions


def main():
    actions, queue = load(sys.argv[1]), []
    for line in sys.stdin:
        message = json.loads(line)
        if message["type"] == "episode_start":
            queue = list(actions.get(message["episode_id"], []))
            print(f"episode {message['episode_id']}: {len(queue)} actions to replay", file=sys.stderr)
        elif message["type"] == "observation":
            action = queue.pop(0) if queue else {"kind": "answer", "text": "I have nothing more.", "fields": {}}
            sys.stdout.write(json.dumps(action) + "\n")
            sys.stdout.flush()
        # episode_end and any unknown message type: nothing to say


if __name__ == "__main__":
    main()
