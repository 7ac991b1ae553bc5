"""A deployed stack's CloudFormation outputs, which name its resources (``settings.OUTPUT_*``).

The CLI finds everything through them: ``Stack.names`` gives the
``StackNames`` the handlers' adapters take, the other outputs (the Athena
workgroup, the watch's schedule) are read by key.
"""

from __future__ import annotations

from crawlstack import settings
from crawlstack.aws.connection import Connection
from crawlstack.aws.errors import DeployedError, aws_errors
from crawlstack.aws.names import MissingOutput, StackNames


class Stack:
    """A deployed stack's outputs (DescribeStacks, read once), through ``connection``."""

    def __init__(self, connection: Connection, name: str = settings.STACK_NAME) -> None:
        self.connection = connection
        self.name = name
        self._outputs: dict[str, str] | None = None

    @property
    def outputs(self) -> dict[str, str]:
        if self._outputs is None:
            try:
                with aws_errors(f"stack {self.name}"):
                    cfn = self.connection.client("cloudformation")
                    stacks = cfn.describe_stacks(StackName=self.name)["Stacks"]
            except DeployedError as exc:
                if "does not exist" in str(exc):
                    raise DeployedError(
                        f"no stack named {self.name!r} in this account and region (deploy it, or pass --stack NAME)", 2
                    ) from exc
                raise
            self._outputs = {o["OutputKey"]: o["OutputValue"] for o in stacks[0].get("Outputs", [])}
        return self._outputs

    def output(self, key: str) -> str:
        value = self.outputs.get(key)
        if not value:
            raise self._missing(key)
        return value

    def names(self) -> StackNames:
        """The names every table, queue and the bucket has in this stack, for the adapters."""
        try:
            return StackNames.from_outputs(self.outputs)
        except MissingOutput as exc:
            raise self._missing(exc.key) from None

    def queue_url(self, key: str) -> str:
        return self.output(settings.OUTPUT_QUEUE_URL[key])

    def dlq_url(self, key: str) -> str:
        return self.output(settings.OUTPUT_DLQ_URL[key])

    def table(self, key: str) -> str:
        return self.output(settings.OUTPUT_TABLE[key])

    def _missing(self, key: str) -> DeployedError:
        return DeployedError(
            f"stack {self.name!r} has no output {key!r}: deployed from an older version? (make infra-deploy)", 2
        )
