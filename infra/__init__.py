"""The crawlstack CDK stack: one construct per capability, composed by ``CrawlstackStack``."""

from infra.config import CrawlConfig, LambdaAssets
from infra.stack import CrawlstackStack

__all__ = ["CrawlConfig", "CrawlstackStack", "LambdaAssets"]
