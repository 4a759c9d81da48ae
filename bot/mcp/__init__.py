"""`ncclbot serve mcp`: ncclbot's analysis, knowledge and node diagnostics as MCP tools.

`backend.Backend` does the work without knowing MCP (thin calls into the service, the
Troubleshooter, the agent's knowledge tools and the node runner; every result redacted on
the way out); `server.build_server` publishes it with the `mcp` SDK (the `mcp` extra),
`server.serve` runs it over stdio or streamable HTTP (`auth` guards HTTP with a bearer
token). `SKILL.md` beside this file tells an agent how to use the tools in order.
"""
