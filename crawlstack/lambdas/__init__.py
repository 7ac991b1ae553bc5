"""The functions' work, one module each (dispatch, fetch, extract, schedule), on the services they are given.

``functions/<name>/handler.py`` is each Lambda's entry point: it reads its
environment once (``environment.HandlerSettings``), builds its container's
services on the stack's adapters and calls the body here; local mode calls
the same bodies on its own services (``crawlstack.local.services``).
Nothing is imported here: each function loads only its own body.
"""
