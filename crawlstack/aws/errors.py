"""The deployed commands' failures: one line, and the exit status the CLI gives.

The CLI runs its AWS calls inside ``aws_errors``, which turns botocore's
exceptions into a ``DeployedError`` naming what was being done.  The
handlers' adapters let botocore's exceptions through: their retries and
partial batch failures read them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError, NoRegionError


class DeployedError(Exception):
    """A one-line failure; ``status`` is the exit status (2: the user's mistake, 1: at run time)."""

    def __init__(self, message: str, status: int = 1) -> None:
        super().__init__(message)
        self.status = status


@contextlib.contextmanager
def aws_errors(what: str) -> Iterator[None]:
    """Turn botocore's exceptions into one line naming what was being done."""
    try:
        yield
    except ClientError as exc:
        error = exc.response.get("Error", {})
        code, message = error.get("Code", "error"), error.get("Message", "") or str(exc)
        raise DeployedError(f"{what}: {code}: {message}") from exc
    except NoRegionError as exc:
        raise DeployedError("no AWS region: set AWS_REGION (or AWS_DEFAULT_REGION), or pass --region", 2) from exc
    except NoCredentialsError as exc:
        raise DeployedError("no AWS credentials: configure them as for the aws CLI", 2) from exc
    except BotoCoreError as exc:
        raise DeployedError(f"{what}: {exc}") from exc
