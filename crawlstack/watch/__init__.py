"""Watching sources over time: listings re-checked politely, their new items published once (issue 17)."""
