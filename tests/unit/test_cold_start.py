"""What each Lambda handler leaves out of its import (cold start), and that tracing still records.

Each check runs in a fresh interpreter, with the environment of a deployed
function (``LAMBDA_TASK_ROOT`` set, so tracing is on) or of local mode
(``POWERTOOLS_TRACE_DISABLED``), and looks at ``sys.modules`` after importing
the handler: no timing, so it holds on a loaded machine too.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from crawlstack import settings

ROOT = Path(__file__).resolve().parents[2]
HANDLERS = ("dispatch", "fetch", "extract")

# Modules no handler imports at cold start.  The X-Ray SDK loads at the first
# invocation with tracing on and never with it off (crawlstack.lambdas.tracing); of
# patch_all's libraries only botocore is patched, so requests and sqlite3 are
# not imported for it.  lxml.html and w3lib.encoding load when a page is first
# decoded and parsed (extract), charset-normalizer when a page's encoding is
# guessed, cssselect and jsonpath-ng when rules are compiled, jsonschema never.
DEFERRED_ALL = (
    "aws_xray_sdk.core",
    "requests",
    "sqlite3",
    "lxml.html",
    "w3lib.encoding",
    "charset_normalizer",
    "cssselect",
    "jsonpath_ng",
    "jsonschema",
)
# And each handler leaves out the services of the others (crawlstack.wiring).
DEFERRED = {
    "dispatch": (*DEFERRED_ALL, "crawlstack.extract", "crawlstack.fetcher", "crawlstack.fetch.warc", "warcio"),
    "fetch": (*DEFERRED_ALL, "crawlstack.extract"),
    "extract": (*DEFERRED_ALL, "crawlstack.fetcher"),
}


def _env(tracing: bool) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("AWS_", "POWERTOOLS_", "LAMBDA_", "CRAWLSTACK_", "_X_AMZN"))
    }
    env.update(
        {
            "PYTHONPATH": str(ROOT),
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            settings.ENV_RULES_DIR: str(ROOT / "rules"),
            settings.ENV_BUCKET: "pages",
            "POWERTOOLS_METRICS_NAMESPACE": settings.METRICS_NAMESPACE,
        }
    )
    env.update({settings.ENV_QUEUE_URL[key]: f"https://sqs.us-east-1.amazonaws.com/1/{key}" for key in settings.QUEUES})
    env.update({settings.ENV_TABLE[key]: key for key in settings.TABLES})
    if tracing:
        env.update({"LAMBDA_TASK_ROOT": str(ROOT), "AWS_LAMBDA_FUNCTION_NAME": "crawlstack-test"})
    else:
        env["POWERTOOLS_TRACE_DISABLED"] = "true"
    return env


def _run(code: str, tracing: bool) -> dict:
    result = subprocess.run(
        [sys.executable, "-c", code], env=_env(tracing), cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("tracing", [True, False], ids=["tracing-on", "tracing-off"])
@pytest.mark.parametrize("name", HANDLERS)
def test_handler_import_leaves_out_deferred_modules(name: str, tracing: bool) -> None:
    code = (
        "import json, sys\n"
        f"import functions.{name}.handler\n"
        f"print(json.dumps(sorted(m for m in {DEFERRED[name]!r} if m in sys.modules)))\n"
    )
    assert _run(code, tracing) == []


_TRACED_CALL = """
import json, sys
import functions.dispatch.handler as handler
loaded_at_import = "aws_xray_sdk.core" in sys.modules

from aws_xray_sdk.core import xray_recorder
from botocore.stub import Stubber
from crawlstack import aws

sent = []

class Emitter:
    def send_entity(self, entity):
        sent.append(entity.to_dict())

    def set_daemon_address(self, address):
        pass

xray_recorder.emitter = Emitter()

@handler.tracer.capture_lambda_handler
def probe(event, context):
    sqs = aws.client("sqs")
    with Stubber(sqs) as stub:
        stub.add_response("get_queue_url", {"QueueUrl": "https://queue"}, {"QueueName": "frontier"})
        sqs.get_queue_url(QueueName="frontier")

probe({}, None)

def names(entity):
    yield entity["name"]
    for sub in entity.get("subsegments", []):
        yield from names(sub)

print(json.dumps({
    "loaded_at_import": loaded_at_import,
    "names": sorted({n for entity in sent for n in names(entity)}),
    "streaming_threshold": xray_recorder.streaming_threshold,
}))
"""


def test_tracing_on_records_the_handler_and_its_aws_calls() -> None:
    """The SDK loads at the first subsegment, before the handler runs: its botocore calls are traced as before."""
    trace_id = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
    out = _run(f"import os; os.environ['_X_AMZN_TRACE_ID'] = {trace_id!r}\n" + _TRACED_CALL, tracing=True)
    assert out["loaded_at_import"] is False
    assert "## probe" in out["names"]
    assert "sqs" in out["names"]  # the botocore call, as patched
    assert out["streaming_threshold"] == 0
