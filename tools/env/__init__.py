"""The environment of a node: variables, versions, limits, interfaces, and their lint."""
