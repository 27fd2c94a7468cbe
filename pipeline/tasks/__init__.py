"""Tasks: the nine static families compiled from the store, gold answers computed by the tools."""
