"""cdk-nag's AwsSolutions checks pass on the stack: every finding is fixed or suppressed with a reason."""

from __future__ import annotations

import csv
import json
import shlex
import subprocess
import sys
from pathlib import Path

import aws_cdk as cdk
import pytest
from cdk_nag import AwsSolutionsChecks

from crawlstack import settings
from infra.config import CTX_RETAIN_DATA, LambdaAssets
from infra.stack import CrawlstackStack

ROOT = Path(__file__).resolve().parents[2]
CONTEXT = json.loads((ROOT / "cdk.json").read_text())["context"]
# The same checks as `make infra-lint` (make/infra.mk's CFN_LINT_FLAGS).
_MK = (ROOT / "make" / "infra.mk").read_text()
CFN_LINT_ARGS = shlex.split(_MK.split("CFN_LINT_FLAGS ?=", 1)[1].splitlines()[0])


@pytest.mark.parametrize("retain_data", [True, False])
def test_no_unsuppressed_nag_findings(assets: LambdaAssets, tmp_path: Path, retain_data: bool) -> None:
    app = cdk.App(context={**CONTEXT, CTX_RETAIN_DATA: retain_data}, outdir=str(tmp_path))
    cdk.Aspects.of(app).add(AwsSolutionsChecks(reports=True))
    CrawlstackStack(app, settings.STACK_NAME, assets=assets)
    app.synth()  # an unsuppressed error fails here already (ValidationFailed)
    [report] = tmp_path.glob("AwsSolutions-*-NagReport.csv")
    rows = list(csv.DictReader(report.open()))
    assert rows, "the report lists every rule checked"
    open_findings = [r for r in rows if r["Compliance"] == "Non-Compliant"]
    assert open_findings == []
    suppressed = [r for r in rows if r["Compliance"] == "Suppressed"]
    # Every suppression carries a written reason.
    assert suppressed and all(len(r["Exception Reason"]) > 40 for r in suppressed)
    # Never a blanket suppression of a whole rule: IAM5 findings are each named.
    assert all(r["Exception Reason"].startswith("[") for r in suppressed if r["Rule ID"] == "AwsSolutions-IAM5")


def test_template_is_cfn_lint_clean(assets: LambdaAssets, tmp_path: Path) -> None:
    app = cdk.App(context=CONTEXT, outdir=str(tmp_path))
    CrawlstackStack(app, settings.STACK_NAME, assets=assets)
    app.synth()
    template = tmp_path / f"{settings.STACK_NAME}.template.json"
    cmd = [str(Path(sys.executable).with_name("cfn-lint")), *CFN_LINT_ARGS, str(template)]
    result = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
