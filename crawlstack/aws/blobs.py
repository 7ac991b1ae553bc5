"""The pages bucket."""

from __future__ import annotations

from collections.abc import Iterator

from crawlstack.aws.connection import ENVIRONMENT, Connection


class BlobStore:
    """The pages bucket."""

    def __init__(self, bucket: str, *, connection: Connection = ENVIRONMENT) -> None:
        self.connection = connection
        self.bucket = bucket

    def put(self, key: str, data: bytes, content_type: str) -> None:
        self.connection.client("s3").put_object(Bucket=self.bucket, Key=key, Body=data, ContentType=content_type)

    def get(self, key: str, bucket: str | None = None) -> bytes:
        body: bytes = self.connection.client("s3").get_object(Bucket=bucket or self.bucket, Key=key)["Body"].read()
        return body

    def keys(self, prefix: str, since: float | None = None) -> Iterator[str]:
        """Keys under ``prefix``; with ``since`` (epoch seconds), only those written after it."""
        for page in (
            self.connection.client("s3").get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix)
        ):
            for obj in page.get("Contents", []):
                if since is None or obj["LastModified"].timestamp() >= since:
                    yield obj["Key"]
