"""The `kreplica` command line: one module per subcommand, each parsing, calling an engine from
another room and rendering what it returns.

Holds: `main` (the click group, where every error becomes one stderr line and an exit code),
`check`, `replay`, `fuzz`, `conform`.

May import: every other room. No other room imports it.
"""
