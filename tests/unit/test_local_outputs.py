"""Writing OUT/ survives AWS calls that keep failing for a while (a flaky --endpoint-url)."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError, ConnectionClosedError

from crawlstack.local import runner


def failing(times: int, error: Exception) -> Any:
    calls = {"n": 0}

    def write() -> dict[str, Any]:
        calls["n"] += 1
        if calls["n"] <= times:
            raise error
        return {"written": calls["n"]}

    return write, calls


SCAN_FAILED = ClientError({"Error": {"Code": "InternalServerError", "Message": "boom"}}, "Scan")


@pytest.mark.parametrize("error", [SCAN_FAILED, ConnectionClosedError(endpoint_url="http://127.0.0.1:1")])
def test_outputs_are_written_once_the_calls_succeed_again(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], error: Exception
) -> None:
    monkeypatch.setattr(runner.time, "sleep", lambda s: None)
    write, calls = failing(2, error)
    assert runner._with_retries(write) == {"written": 3}
    assert calls["n"] == 3
    assert capsys.readouterr().err.count("trying again") == 2


def test_outputs_give_up_after_their_tries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runner.time, "sleep", lambda s: None)
    write, calls = failing(100, SCAN_FAILED)
    with pytest.raises(ClientError):
        runner._with_retries(write)
    assert calls["n"] == runner.OUTPUT_TRIES
