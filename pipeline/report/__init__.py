"""Report: the self-contained HTML report and the terminal views of episodes and results."""
