"""Fetch: host runs work each host's backlog politely, archive exchanges as WARCs and log outcomes."""
