"""Shared by every suite: ``fakes`` (tests/fakes.py), the in-memory stores that unit tests run on and
the integration suites hold to the same contracts as the AWS adapters (one conformance suite per port).

pytest puts this folder on the import path because this file is here (its rootdir-relative
conftest rule), so ``from fakes import ...`` works from any suite without touching sys.path.
"""
