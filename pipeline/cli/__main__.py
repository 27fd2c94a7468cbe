"""`python -m pipeline.cli` runs the command line (used by verify for its clean rebuilds)."""

from pipeline.cli import main

main()
