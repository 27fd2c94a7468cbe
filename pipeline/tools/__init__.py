"""Tools: typed, read-only functions over the tool store, shared by tasks, agents, scorer and MCP."""
