"""Local mode's lock around Powertools' shared metric set."""

from __future__ import annotations

import io
import sys
import threading
import warnings
from contextlib import redirect_stdout

from aws_lambda_powertools import Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.metrics.provider.cloudwatch_emf.cloudwatch import AmazonCloudWatchEMFProvider

from crawlstack.local.metrics import serialised_metrics


def run_threads() -> tuple[list[BaseException], str]:
    """Six threads adding and flushing, switching as often as the interpreter can (which, unlocked,
    fails flushes with SchemaValidationError and 'dictionary changed size during iteration')."""
    errors: list[BaseException] = []
    out = io.StringIO()

    def work(service: str) -> None:
        metrics = Metrics(namespace="test", service=service)
        for _ in range(300):
            try:
                metrics.add_metric(name="Pages", unit=MetricUnit.Count, value=1)
                metrics.flush_metrics()
            except Exception as exc:  # SchemaValidationError when the set was emptied mid-flush
                errors.append(exc)

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        with redirect_stdout(out), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            threads = [threading.Thread(target=work, args=(f"s{i}",)) for i in range(6)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
    finally:
        sys.setswitchinterval(interval)
    return errors, out.getvalue()


def test_threads_adding_and_flushing_at_once_never_fail_a_flush() -> None:
    with serialised_metrics():
        errors, out = run_threads()
    assert errors == []
    assert out.count('"Pages"') > 0


def test_the_provider_is_left_as_it_was() -> None:
    before = AmazonCloudWatchEMFProvider.flush_metrics
    with serialised_metrics():
        assert AmazonCloudWatchEMFProvider.flush_metrics is not before
    assert AmazonCloudWatchEMFProvider.flush_metrics is before
