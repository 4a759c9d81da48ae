"""The bot's side of node agents: the inventory of nodes and a signed HTTP client."""
