#!/usr/bin/env python3
"""CDK app: ``npx cdk synth`` runs this (see cdk.json).

Needs the Lambda build output: ``make build-lambda`` first (``make synth``
does both).  Context keys are documented in infra/config.py; defaults are in
cdk.json.
"""

from __future__ import annotations

import sys
from pathlib import Path

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks

from crawlstack import settings
from infra.config import CTX_LAMBDA_BUILD_DIR, ConfigError, LambdaAssets, StackConfig
from infra.stack import CrawlstackStack


def main() -> None:
    app = cdk.App()
    try:
        build_dir = Path(app.node.try_get_context(CTX_LAMBDA_BUILD_DIR) or "build/lambda")
        assets = LambdaAssets.from_build_dir(build_dir)
        config = StackConfig.from_context(app.node)
    except ConfigError as exc:
        sys.exit(f"error: {exc}")
    # cdk-nag's AwsSolutions rules at every synth; reports=True writes
    # AwsSolutions-<stack>-NagReport.csv into cdk.out.  Unsuppressed errors
    # fail the synth; each suppression's reason is in infra/nag.py.
    cdk.Aspects.of(app).add(AwsSolutionsChecks(reports=True, verbose=True))
    CrawlstackStack(
        app,
        settings.STACK_NAME,
        assets=assets,
        config=config,
        description=f"{settings.APP_NAME} {settings.VERSION}: polite serverless web crawler",
    )
    app.synth()


if __name__ == "__main__":
    main()
