"""The crawlstack CDK stack: one construct per capability, composed by ``CrawlstackStack``."""

from infra.config import LambdaAssets, StackConfig
from infra.stack import CrawlstackStack

__all__ = ["CrawlstackStack", "LambdaAssets", "StackConfig"]
