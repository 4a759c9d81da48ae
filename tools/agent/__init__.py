"""The node agent: an authenticated HTTP service serving this node's diagnostics."""
