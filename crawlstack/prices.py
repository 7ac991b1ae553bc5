"""AWS us-east-1 list prices, in dollars per unit: what the cost benchmark bills and a run's sleep is weighed against.

One table for both, so the fetcher's choice between sleeping and being
woken later (``crawlstack.fetch.pacing``) prices the same calls the
benchmark counts (``crawlstack.local.billing``).
"""

from __future__ import annotations

PRICES = {
    "sqs_requests": 0.40 / 1_000_000,
    "ddb_wru": 0.625 / 1_000_000,
    "ddb_rru": 0.125 / 1_000_000,
    "s3_put": 0.005 / 1_000,
    "s3_get": 0.0004 / 1_000,
    "lambda_gb_s": 0.0000133334,  # arm64
    # Every invocation, whatever it does: an event source mapping's batch is one.
    "lambda_requests": 0.20 / 1_000_000,
    # CloudWatch Logs ingestion (standard class), per GB taken as 10^9 bytes
    # (the larger of the two readings of "GB"); storage is left out, a few
    # cents a GB-month at the log groups' retention.
    "logs_ingested_gb": 0.50,
    # Amazon EventBridge pricing, "Event buses": custom events (PutEvents) at $1.00 a million, each 64 KB
    # chunk of an entry's payload billed as one event (crawlstack.local.billing counts the chunks).
    "events_put": 1.00 / 1_000_000,
    # Amazon EventBridge pricing, "Scheduler": $1.00 a million scheduled invocations.  Its free tier (14
    # million invocations a month) is left out, as every free tier is here.
    "scheduler_invocations": 1.00 / 1_000_000,
}
