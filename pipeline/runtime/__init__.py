"""Runtime: the user simulator, the gold path, the runner, agents and scoring."""
