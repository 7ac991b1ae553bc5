"""Unit-test settings."""

from __future__ import annotations

import pytest

from crawlstack import settings


@pytest.fixture(autouse=True)
def _two_place_window(monkeypatch: pytest.MonkeyPatch) -> None:
    """A delayed host's window of 2 (the one in flight and the next): the parking tests fill it in two URLs.

    The mechanics do not depend on the size; the default (4) is tested where it matters.
    """
    monkeypatch.setattr(settings, "DELAYED_HOST_WINDOW", 2)
