"""Names and settings shared by the stack, the Lambda handlers and local mode.

This is the one source of resource names, key schemas, queue and function
settings and crawl defaults.  ``infra/`` builds the CDK stack from it,
``crawlstack.local`` creates the same resources in the embedded emulator from
it, and the tests import it too.

Handlers find physical resource names in environment variables (``ENV_*``
below); CDK sets them from the constructs, local mode sets them to the
``LOCAL_NAMES`` defaults.
"""

from __future__ import annotations

from dataclasses import dataclass, field

APP_NAME = "crawlstack"
VERSION = "0.1.0"

# --- crawl defaults -------------------------------------------------------
DEFAULT_CRAWL_ID = "default"
DEFAULT_USER_AGENT = f"crawlstack/{VERSION} (+https://github.com/crawlstack/crawlstack/blob/main/docs/bot.md)"
DEFAULT_DELAY_SECONDS = 5.0
DEFAULT_MAX_DEPTH = 2
# Robots.txt Crawl-delay above this is clamped: a host's wake-up must fit
# SQS's 15-minute delay limit.
MAX_CRAWL_DELAY_SECONDS = 300.0
# Most bytes of one backlog bundle's tasks (crawlstack.aws.backlog): a host's
# waiting URLs share an item, since DynamoDB bills a write unit per KB and
# an item of 16 KB holds ~70-260 compressed tasks (one item per URL costs a
# unit each).  Bounded because deleting an item costs its size again and
# replacing a partly served bundle rewrites its rest; rounding up to whole KB
# wastes under 1 KB of 16; a consistent read of it is 4 read units.
BACKLOG_BUNDLE_BYTES = 16 * 1024

# Outlinks each extract container remembers having sent to the frontier, so
# the 30 links a page repeats from its neighbours are not sent again.  The
# frontier's conditional write stays the final word on dedupe.
OUTLINK_CACHE_SIZE = 200_000
# Links of one page per frontier message (crawlstack.messages.pack_links): a
# dispatch batch of 10 such messages stays well inside the function's timeout.
LINKS_PER_FRONTIER_MESSAGE = 50
# Pages of a host's cap (max_pages_per_host) a dispatch container takes with
# one conditional write and admits from memory (crawlstack.dispatch.caps).
HOST_CAP_CHUNK = 16
# Pages of the crawl's budget (max_pages) a dispatch container takes with one
# conditional write: at most BUDGET_CHUNK, and at most 1/BUDGET_CHUNK_SHARE of
# what the budget had left at its last take, so the pages a recycled
# container takes with it are a small share of the budget, down to none
# near its end (crawlstack.dispatch.caps).
BUDGET_CHUNK = 16
BUDGET_CHUNK_SHARE = 64
# Completed records (crawlstack.records.resolution) each dispatch and extract
# container remembers, so their messages and pages cost no reads.
COMPLETED_RECORD_CACHE_SIZE = 100_000

# Spider traps (crawlstack.scope).  A crawl admits at most this many URLs of
# one host name (its ``max_pages_per_host``, the crawl flag
# ``--max-pages-per-host``); None in a crawl's config means no cap.
DEFAULT_MAX_PAGES_PER_HOST = 10_000
# A path whose one segment occurs more than this many times, or whose run of
# segments repeats this many times back to back (/a/b/a/b/a/b), is a trap.
MAX_SEGMENT_REPEATS = 3
# Paths with more segments, and queries with more parameters, are traps too.
MAX_PATH_SEGMENTS = 32
MAX_QUERY_PARAMS = 32
# Ports every crawl may fetch; others need the crawl's ``allow_ports`` or a
# seed on that host and port.
DEFAULT_PORTS = (80, 443)
# URLs each dispatch container remembers having noted as dropped, so a link
# repeated on every page of a site costs one write to the urls table.
DROPPED_NOTE_CACHE_SIZE = 100_000
# Skipped hrefs extract logs as examples per WARC (the rest are only counted).
SKIPPED_LINK_SAMPLE = 5
# Hrefs of one page extract reads at all (in document order): a 10 MiB page
# of nothing but links would otherwise hold a million strings.
MAX_HREFS_PER_PAGE = 50_000
# A page's extraction (decoding, parsing, mappings, links) may take this long;
# past it the page is failed, "extraction budget of 5s exceeded", and the rest
# of its WARC goes on (crawlstack.rules.budget).
EXTRACTION_BUDGET_SECONDS = 5.0
# Records one page of a mapping with ``items`` gives, and values one field
# holds, at most: a hostile listing must not become a million records.  A
# selector step (css, xpath, jsonpath, split) stops at one match more, so a
# cut is known and noted, and never builds every match first.
MAX_ITEMS_PER_PAGE = 1000
# Characters one field's values hold at most (a JSON value counted as its JSON
# text), enforced while they are built: an element's text includes its
# descendants', so a page nesting the selected element 500 deep would repeat
# its text 500 times.  A cut field gets a crawl-log note.
MAX_FIELD_CHARS = 1_000_000
# Characters all the records of one page hold at most, and each url_parser's values.
MAX_PAGE_VALUE_CHARS = 10_000_000
# Nodes (elements, attributes, text, comments) of a page's markup that are
# parsed at most; the rest of the page is not read, with a note.  lxml takes
# over 100 bytes a node: a 10 MiB page of tiny tags would take 500 MB and more.
# A JSON page of more objects and arrays than this is read as null, with a note.
MAX_PAGE_NODES = 1_000_000
# Attributes of one HTML start tag that are parsed; the rest of that tag's are
# left out, with a note.  libxml2's HTML parser compares each attribute with
# every one before it in its tag, in C where no time budget reaches: one tag
# of a million attributes took hours.  A page this small or smaller is not
# scanned (the worst tag it can hold parses in well under a second).
MAX_TAG_ATTRIBUTES = 1000
ATTRIBUTE_SCAN_MIN_BYTES = 128 * 1024
# In-scope links one page may send to the frontier: a page of a million
# generated links (a trap, or a hostile page) costs at most this many
# messages; the rest are counted (HrefsSkippedOverPageCap).
MAX_OUTLINKS_PER_PAGE = 5_000
# A crawl-log note is a sentence or two; bounded so no page can grow a urls item.
NOTE_MAX_CHARS = 1000
# Hrefs on one page that are no fetchable URL (javascript:, a bad port or
# percent-escape, ...) sent on to dispatch, which drops each with its reason
# in the crawl log; the rest are only counted.
INVALID_LINKS_FORWARDED_PER_PAGE = 20
# Seconds one call of a user's regex (url_patterns, the regex and replace
# processors, --allow/--deny) may run before it counts as no match
# (crawlstack.rules.patterns): a pattern that backtracks exponentially on a crafted
# href or page text costs this, not the Lambda's whole timeout.
USER_PATTERN_TIMEOUT_SECONDS = 0.1
# Copies a user's regex may stand for through its counted repeats, nested ones
# multiplying (crawlstack.rules.patterns): the engine unrolls them when compiling, so
# ((a{1000}){1000}){1000} would take gigabytes; 10,000 compile in a few MB.
USER_PATTERN_MAX_COPIES = 10_000

# --- fetching -------------------------------------------------------------
MAX_BODY_BYTES = 10 * 1024 * 1024
CONNECT_TIMEOUT_SECONDS = 10.0
READ_TIMEOUT_SECONDS = 20.0
TOTAL_DEADLINE_SECONDS = 60.0
MAX_URL_LENGTH = 2048
ROBOTS_MAX_BYTES = 500 * 1024
ROBOTS_MAX_REDIRECTS = 5
ROBOTS_TTL_SECONDS = 24 * 3600
# Origins whose robots.txt policy a container remembers (dispatch's, and the
# fetch runner's); the oldest is forgotten first.
ROBOTS_MEMORY_ORIGINS = 10_000
# A 5xx or unreachable robots.txt disallows the host; retry it sooner than a
# good one so a passing outage does not block a host for a day.
ROBOTS_ERROR_TTL_SECONDS = 3600
# Retries of HTTP errors (crawlstack.fetch.outcomes): 5xx, 429, 408 and network
# timeouts or connection failures are tried at most RETRY_MAX_ATTEMPTS times
# in all.  Attempt n that fails waits uniform(0, min(RETRY_MAX_BACKOFF_SECONDS,
# RETRY_BASE_SECONDS * 2**n)) ("full jitter"), or the response's Retry-After if
# longer; a Retry-After beyond RETRY_AFTER_MAX_SECONDS (SQS's longest delay)
# is not waited for: the URL fails at once, never retried sooner than asked.
RETRY_MAX_ATTEMPTS = 3
RETRY_BASE_SECONDS = 2.0
RETRY_MAX_BACKOFF_SECONDS = 60.0
RETRY_AFTER_MAX_SECONDS = 900.0
RETRY_STATUSES = frozenset({408, 429, *range(500, 600)})
# Adaptive delay (crawlstack.fetch.host_loop): a 429 or 503 multiplies the host's
# effective delay by ADAPTIVE_DELAY_FACTOR (at least ADAPTIVE_DELAY_FLOOR_SECONDS,
# at most MAX_CRAWL_DELAY_SECONDS); each success multiplies it by
# ADAPTIVE_DELAY_RECOVERY until it is back at the configured delay (for a
# configured delay of 0: until it is below ADAPTIVE_DELAY_MIN_SECONDS, about 22
# successes after the floor).
SLOWDOWN_STATUSES = frozenset({429, 503})
ADAPTIVE_DELAY_FACTOR = 2.0
ADAPTIVE_DELAY_FLOOR_SECONDS = 1.0
ADAPTIVE_DELAY_RECOVERY = 0.9
ADAPTIVE_DELAY_MIN_SECONDS = 0.1
# Content types kept; anything else is skipped by content type.
TEXT_CONTENT_TYPES = (
    "text/html",
    "application/xhtml+xml",
    "text/xml",
    "application/xml",
    "application/json",
    "text/plain",
)

# --- SQS ------------------------------------------------------------------
MAX_SQS_DELAY_SECONDS = 900
SQS_BATCH_SIZE = 10
MAX_RECEIVE_COUNT = 5
# Local mode: a message in flight at this many kills of the crawl in a row
# (each found by the resume's recover) goes to its dead-letter queue,
# "killed while processing", so a page that kills the process every time
# cannot loop for ever.  A kill is not a failed receive: recover gives the
# receive back (crawlstack.local.sqlite.queues).
MAX_CONSECUTIVE_KILLS = 3
KILLED_WHILE_PROCESSING = "killed while processing"


@dataclass(frozen=True)
class QueueSpec:
    """One SQS queue with its dead-letter queue, and the Lambda it feeds."""

    key: str
    name: str
    consumer: str
    visibility_timeout_seconds: int
    batch_size: int = SQS_BATCH_SIZE
    max_receive_count: int = MAX_RECEIVE_COUNT
    # The event source mapping's MaximumBatchingWindowInSeconds (0: none);
    # a batch over 10 needs one.
    batching_window_seconds: int = 0

    @property
    def dlq_name(self) -> str:
        return f"{self.name}-dlq"


@dataclass(frozen=True)
class FunctionSpec:
    """One Lambda function: its handler module and sizing."""

    key: str
    handler: str
    timeout_seconds: int
    memory_mb: int


FUNCTIONS = {
    "dispatch": FunctionSpec("dispatch", "functions/dispatch/handler.handler", 60, 512),
    "fetch": FunctionSpec("fetch", "functions/fetch/handler.handler", 300, 512),
    "extract": FunctionSpec("extract", "functions/extract/handler.handler", 120, 1024),
    # Invoked each minute by an EventBridge Scheduler schedule, not by a queue (infra.watch).
    "schedule": FunctionSpec("schedule", "functions/schedule/handler.handler", 300, 512),
}

# Visibility timeout is 6x the consumer's timeout, as AWS recommends for
# Lambda event sources.
QUEUES = {
    "frontier": QueueSpec("frontier", "crawlstack-frontier", "dispatch", 6 * FUNCTIONS["dispatch"].timeout_seconds),
    # Run messages, a host each: one invocation works up to 100
    # hosts side by side, sharing its sleep between their requests.  100,
    # because at most 1,000 batches of one event source mapping run at once
    # (standard mode): 100 hosts a batch is 100,000 hosts at once before
    # provisioned pollers are needed; the break-even wait (sleeping against
    # being woken, crawlstack.fetch.pacing) grows with the hosts sharing it;
    # the event stays far under Lambda's 6 MB payload (a record is about
    # 1 KB); and 100 threads and connection pools fit 512 MB.  A window of
    # 1 s lets a batch gather the run messages a dispatch batch sends at once
    # and delays a run's start by at most 1 s, under any host's delay that
    # matters; longer would only hold runs back.
    "fetch": QueueSpec(
        "fetch",
        "crawlstack-fetch",
        "fetch",
        6 * FUNCTIONS["fetch"].timeout_seconds,
        batch_size=100,
        batching_window_seconds=1,
    ),
    # One WARC (a flush of a fetch invocation's hosts) per extract invocation: it is
    # CPU-bound work, and its outlinks reach the frontier in smaller waves.
    "extract": QueueSpec(
        "extract", "crawlstack-extract", "extract", 6 * FUNCTIONS["extract"].timeout_seconds, batch_size=1
    ),
}

# A new host run (crawlstack.runs.admission) may be replaced by the next
# admission to its host once past ``now + MAX_SQS_DELAY_SECONDS +`` this:
# its run message may wait out SQS's longest delay, then for a fetch
# invocation to receive it (one busy with other hosts for up to its timeout)
# and take the first lease, which moves the expiry on with the lease.  Too
# short costs only a spare run message (a run replaced is never leased: the
# lease checks ``run_id``); too long keeps a host whose run message was lost
# waiting that much longer for the next admission to start it again.
RUN_SCHEDULE_GRACE_SECONDS = FUNCTIONS["fetch"].timeout_seconds

# A fetch invocation's host runs (crawlstack.fetch.host_runner).  A lease is taken
# for RUN_LEASE_SECONDS and renewed before a request that would start with
# less than RUN_LEASE_RENEW_BEFORE_SECONDS of it left (a request's
# TOTAL_DEADLINE_SECONDS and a flush fit in it).  Fetched pages are flushed
# (WARC, crawl log, outcomes, backlog) every RUN_FLUSH_SECONDS or
# RUN_FLUSH_BYTES, so extraction never waits for the invocation; a host stops
# RUN_STOP_MARGIN_SECONDS before the invocation's deadline; RUN_PEEK_BUNDLES
# bundles of its backlog are read at a time.
RUN_LEASE_SECONDS = 120.0
# How long past its lease a leased run stays unreplaceable by ``schedule``
# (``run_expires = lease_until + RUN_GRACE_SECONDS``, crawlstack.runs.ports).
# ``now`` comes from each caller's own clock, so this margin covers clock skew
# between Lambdas and a holder that renews late; past it the holder is dead,
# and a new run is safe (its lease still waits for the old one to end).
RUN_GRACE_SECONDS = 60.0
RUN_LEASE_RENEW_BEFORE_SECONDS = 90.0
RUN_FLUSH_SECONDS = 5.0
RUN_FLUSH_BYTES = 4 * 1024 * 1024
# The hosts of an invocation flush on one grid and share the flush's S3
# objects (crawlstack.fetch.flush_objects): the first to write waits at most this
# long for the others with unflushed work.
RUN_FLUSH_GATHER_SECONDS = 0.2
# ...and its writes are at least this far apart: hosts that run dry one after
# another (at a small delay, each with a page or two unflushed) share one.
RUN_FLUSH_MIN_GAP_SECONDS = 1.0
# A host whose backlog ran dry after fetching pages waits this long for their
# links (flush, extract, dispatch) before its run ends, looking again every
# RUN_LINGER_POLL_SECONDS (an eventually consistent Query each, half a read
# unit), when the wait is cheaper slept than rescheduled
# (crawlstack.fetch.host_loop, HostLoop._linger).
RUN_LINGER_SECONDS = 3.0
RUN_LINGER_POLL_SECONDS = 0.1


@dataclass(frozen=True)
class RunPacing:
    """How often a host run writes what it fetched: the RUN_FLUSH_* times, chosen by the backend.

    Deployed, a write is an S3 PUT of a WARC and of a crawl-log object, so
    writes are few.  On the local backend it is a file and a transaction;
    writing often lets links flow back sooner (crawlstack.wiring.RunHooks).
    """

    flush_seconds: float = RUN_FLUSH_SECONDS
    flush_gather_seconds: float = RUN_FLUSH_GATHER_SECONDS
    flush_min_gap_seconds: float = RUN_FLUSH_MIN_GAP_SECONDS
    # A lingering run looks at its backlog this often; where the backend wakes
    # it as tasks are added (the local one does), only to see if it may end.
    linger_poll_seconds: float = RUN_LINGER_POLL_SECONDS


DEPLOYED_PACING = RunPacing()
# Measured on a 20-host web of 50 KB pages at delay 0: 7.7 s at the deployed
# pacing, 5.3 s at this one (bench/scrapy_compare.py's generated web).
LOCAL_PACING = RunPacing(
    flush_seconds=0.5, flush_gather_seconds=0.02, flush_min_gap_seconds=0.05, linger_poll_seconds=0.25
)
RUN_STOP_MARGIN_SECONDS = TOTAL_DEADLINE_SECONDS + 10.0
RUN_PEEK_BUNDLES = 4


@dataclass(frozen=True)
class TableSpec:
    """One DynamoDB table: partition key, optional sort key and TTL attribute.

    All keys are strings.
    """

    key: str
    name: str
    partition_key: str
    sort_key: str | None = None
    ttl_attribute: str | None = None
    purpose: str = ""
    extra: dict[str, str] = field(default_factory=dict)
    # The stem of the table's construct id and stack output (``<stem>Table``, ``<stem>TableName``).
    # The parked table keeps "Frontier", its stem when first deployed: another construct id
    # would replace the table and its data, and the output name is the CLI's to read.
    deployed_stem: str = ""

    @property
    def stem(self) -> str:
        return self.deployed_stem or self.key.capitalize()


TABLES = {
    "crawls": TableSpec("crawls", "crawlstack-crawls", "crawl_id", purpose="crawl config, seed hosts and counters"),
    "urls": TableSpec("urls", "crawlstack-urls", "pk", purpose="dedupe and outcome per crawl and URL fingerprint"),
    "hosts": TableSpec(
        "hosts",
        "crawlstack-hosts",
        "host",
        sort_key="kind",
        ttl_attribute="expires_at",
        purpose="per-host runs and leases, page counters and the robots.txt cache",
    ),
    "parked": TableSpec(
        "parked",
        "crawlstack-parked",
        "host",
        sort_key="order",
        purpose="each host's backlog of fetch tasks, and held work",
        deployed_stem="Frontier",
    ),
    "results": TableSpec("results", "crawlstack-results", "pk", purpose="one record per mapped page"),
    "resolved": TableSpec(
        "resolved", "crawlstack-resolved", "pk", purpose="one merged record per crawl and seed record_id"
    ),
    "watch": TableSpec(
        "watch",
        "crawlstack-watch",
        "pk",
        sort_key="sk",
        ttl_attribute="expires_at",
        purpose="sources and their schedule state, planned checks, checks' yields and items seen",
    ),
}

# A first try's outcomes that the crawl log alone holds (crawlstack.fetch.outcomes.logged_only),
# counted on the crawl's item in the crawls table as logged_<outcome> for `crawlstack status`.
LOGGED_OUTCOMES = ("fetched", "skipped")
LOGGED_COUNTER_PREFIX = "logged_"

BUCKET_NAME = "crawlstack-pages"
PAGES_PREFIX = "pages/"
# zlib level of each WARC record's gzip member.  warcio's own 9 took 3.5 ms a
# 50 KB page against 0.7 ms at 6, for a file 3% smaller: most of a page's CPU.
WARC_GZIP_LEVEL = 6
RECORDS_PREFIX = "records/"
# One gzipped JSON-lines object per fetch batch and crawl (crawlstack.fetch.crawllog).
CRAWL_LOG_PREFIX = "crawl-log/"
# Athena query results (the analytics construct's workgroup).
ATHENA_RESULTS_PREFIX = "athena-results/"

# --- environment variables the handlers read --------------------------------
ENV_QUEUE_URL = {key: f"CRAWLSTACK_{key.upper()}_QUEUE_URL" for key in QUEUES}
ENV_TABLE = {key: f"CRAWLSTACK_{key.upper()}_TABLE" for key in TABLES}
ENV_BUCKET = "CRAWLSTACK_BUCKET"
ENV_RULES_DIR = "CRAWLSTACK_RULES_DIR"
ENV_DEFAULT_CRAWL_ID = "CRAWLSTACK_DEFAULT_CRAWL_ID"
ENV_DEFAULT_DELAY = "CRAWLSTACK_DEFAULT_DELAY"
ENV_DEFAULT_MAX_DEPTH = "CRAWLSTACK_DEFAULT_MAX_DEPTH"
ENV_USER_AGENT = "CRAWLSTACK_USER_AGENT"
ENV_ALLOW_PRIVATE = "CRAWLSTACK_ALLOW_PRIVATE"
ENV_EVENT_BUS = "CRAWLSTACK_EVENT_BUS"
# A day's budget of checks for all sources together; unset or 0: no budget.
ENV_WATCH_CHECKS_PER_DAY = "CRAWLSTACK_WATCH_CHECKS_PER_DAY"

# --- watching sources, deployed (functions/schedule, crawlstack.aws.watch) --
# EventBridge Scheduler invokes the schedule function at this rate.
SCHEDULE_RATE_MINUTES = 1
# New items go to the stack's event bus as events of this source and detail-type.
EVENT_SOURCE = APP_NAME
EVENT_DETAIL_TYPE = "crawlstack.item"
# PutEvents refuses an entry of 256 KB or more, counted as its Source,
# DetailType and Detail in UTF-8 (EventBridge's "Calculating PutEvents event
# entry size"); a request's entries together must stay under it too.  A larger
# event goes out as a pointer to its whole text in the bucket, under EVENTS_PREFIX.
EVENT_MAX_BYTES = 256 * 1024
EVENTS_PREFIX = "events/"
# PutEvents takes at most this many entries a call.
EVENTS_PER_PUT = 10
# Each day's plan of checks, written before it is applied so that a planning cut short is finished as drawn.
WATCH_PLANS_PREFIX = "watch/plans/"
# A check claimed by the scheduler but not marked sent this long after is claimed again: its sender died
# (twice the schedule function's timeout, so never a live one).
WATCH_CLAIM_SECONDS = 600.0
# A check sent this long ago that no extract ended (robots.txt said no, the fetch failed) ends with what
# its pages found; longer than locally, as a deployed host's run may hold it behind a long backlog.
WATCH_STALE_CHECK_SECONDS = 3600.0
# Planned checks and checks' yields expire from the watch table this long after their time.
WATCH_ITEM_DAYS = 14
# A due check found this late (the scheduler was down or stalled) re-spreads the rest of the day's plan
# (crawlstack.watch.plan_clock), so a host's checks keep their spacing: five ticks deployed.
WATCH_LATE_SECONDS = 300.0
# The oldest due check still unsent this long raises the scheduler's alarm.
WATCH_DUE_ALARM_SECONDS = 900

# --- AWS deployment (infra/ and scripts/build_lambda.py) --------------------
STACK_NAME = "Crawlstack"
LAMBDA_PYTHON_VERSION = "3.12"
LAMBDA_ARCHITECTURE = "arm64"
# Vendored into the shared Lambda layer.  boto3/botocore are left out: the
# Lambda runtime provides them.  Keep the bounds in step with pyproject.toml.
LAMBDA_REQUIREMENTS = (
    "aws-lambda-powertools>=3.0",
    "aws-xray-sdk>=2.12",
    "urllib3>=2.0",
    "certifi",
    "lxml>=5.0",
    "protego>=0.3",
    "w3lib>=2.1",
    "warcio>=1.7",
    "cssselect>=1.2",
    "jsonpath-ng>=1.6",
    "charset-normalizer>=3.0",
    "python-dateutil>=2.8",
    "regex>=2024.4",
)
# Directory of the rules JSON files inside the Lambda code asset.
LAMBDA_RULES_DIR = "rules"
METRICS_NAMESPACE = APP_NAME
# CloudFormation output names of the stack, read by the CLI.
OUTPUT_QUEUE_URL = {key: f"{key.capitalize()}QueueUrl" for key in QUEUES}
OUTPUT_DLQ_URL = {key: f"{key.capitalize()}DlqUrl" for key in QUEUES}
OUTPUT_TABLE = {key: f"{spec.stem}TableName" for key, spec in TABLES.items()}
OUTPUT_BUCKET = "BucketName"
OUTPUT_DASHBOARD = "DashboardName"
OUTPUT_ALARM_TOPIC = "AlarmTopicArn"
OUTPUT_FUNCTION = {key: f"{key.capitalize()}FunctionName" for key in FUNCTIONS}
OUTPUT_EVENT_BUS = "EventBusName"
OUTPUT_SCHEDULE = "ScheduleName"

# --- the CLI for a deployed stack (crawlstack.aws.stack, aws.athena) -------
# Athena: the analytics construct creates a workgroup (with its own result
# location) and a Glue database, and exports their names under these output
# names; `crawlstack query` runs SQL there.  The Glue tables carry the names
# of the local DuckDB views over OUT/ (records.jsonl, crawl-log.jsonl), so one
# SQL text runs on both.  Kept here, not in infra/, so CLI and stack agree.
OUTPUT_WORKGROUP = "AthenaWorkGroupName"
OUTPUT_GLUE_DATABASE = "GlueDatabaseName"
QUERY_TABLES = {"records": "records", "crawl_log": "crawl_log"}
# Seconds `crawlstack query` waits for an Athena query before cancelling it.
QUERY_TIMEOUT_SECONDS = 300.0
