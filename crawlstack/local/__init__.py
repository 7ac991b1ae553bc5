"""Local mode: the same three handlers, one process, an embedded AWS emulator."""
