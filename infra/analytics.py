"""Athena over the bucket: a Glue database, tables over records/ and crawl-log/, a workgroup, named queries."""

from __future__ import annotations

import re

from aws_cdk import Aws, Duration, Stack
from aws_cdk import aws_athena as athena
from aws_cdk import aws_glue as glue
from aws_cdk import aws_s3 as s3
from constructs import Construct

from crawlstack import settings
from crawlstack.records import tables

JSON_SERDE = "org.openx.data.jsonserde.JsonSerDe"
TEXT_INPUT = "org.apache.hadoop.mapred.TextInputFormat"
TEXT_OUTPUT = "org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat"
# First day partition projection considers; earlier days are never listed.
PROJECTION_START = "2024-01-01"
RESULTS_RETENTION = Duration.days(30)
# A cost guard: one query may scan at most this much (Athena bills per byte scanned).
BYTES_SCANNED_CUTOFF = 10 * 1024**3

RECORDS = tables.RECORDS
CRAWL_LOG = tables.CRAWL_LOG
# Partition projection injects crawl_id: every query must name its crawl(s).
NAMED_QUERIES = {
    # Plain SQL that DuckDB runs too (`crawlstack query --local`).
    "records-by-mapping": (
        "Records of one crawl, counted by mapping",
        f"SELECT mapping, count(*) AS records, count(DISTINCT record_id) AS seed_records\nFROM {RECORDS}\n"
        f"WHERE crawl_id = '{settings.DEFAULT_CRAWL_ID}'\nGROUP BY mapping\nORDER BY records DESC",
    ),
    "fetch-outcomes-by-host-and-status": (
        "Fetch outcomes of one crawl by host and HTTP status",
        f"SELECT host, outcome, status, count(*) AS urls\nFROM {CRAWL_LOG}\n"
        f"WHERE crawl_id = '{settings.DEFAULT_CRAWL_ID}'\nGROUP BY host, outcome, status\n"
        "ORDER BY host, urls DESC",
    ),
    "top-failing-hosts": (
        "Hosts of one crawl with the most failed fetches, and their share of failures",
        # A URL's "retry" lines (tries of HTTP errors before its outcome) are not URLs.
        "SELECT host, count_if(outcome = 'failed') AS failures, count_if(outcome <> 'retry') AS urls,\n"
        "  round(100.0 * count_if(outcome = 'failed') / count_if(outcome <> 'retry'), 1) AS failed_pct\n"
        f"FROM {CRAWL_LOG}\nWHERE crawl_id = '{settings.DEFAULT_CRAWL_ID}'\n"
        "GROUP BY host\nHAVING count_if(outcome = 'failed') > 0\nORDER BY failures DESC\nLIMIT 20",
    ),
}


def glue_name(text: str) -> str:
    """Glue and Athena want lower case, digits and underscores."""
    return re.sub(r"[^a-z0-9_]", "_", text.lower())


class Analytics(Construct):
    """Glue tables over the bucket's JSON lines, queried in an Athena workgroup.

    Partition projection (crawl id injected, day projected from
    ``PROJECTION_START`` to today) means no crawler and no ``MSCK REPAIR``: a
    new crawl's objects are queryable as soon as they are written.  Query
    results go to ``athena-results/`` in the same bucket, expired after 30 days.
    """

    def __init__(self, scope: Construct, construct_id: str, *, bucket: s3.Bucket) -> None:
        super().__init__(scope, construct_id)
        stack_name = Stack.of(self).stack_name
        self.database_name = glue_name(stack_name)
        self.database = glue.CfnDatabase(
            self,
            "Database",
            catalog_id=Aws.ACCOUNT_ID,
            database_input=glue.CfnDatabase.DatabaseInputProperty(
                name=self.database_name, description=f"{settings.APP_NAME}: records and crawl log"
            ),
        )
        self.tables = {
            RECORDS: self._table(bucket, RECORDS, settings.RECORDS_PREFIX),
            CRAWL_LOG: self._table(bucket, CRAWL_LOG, settings.CRAWL_LOG_PREFIX),
        }

        bucket.add_lifecycle_rule(
            id="expire-athena-results", prefix=settings.ATHENA_RESULTS_PREFIX, expiration=RESULTS_RETENTION
        )
        self.workgroup = athena.CfnWorkGroup(
            self,
            "WorkGroup",
            name=stack_name,
            description=f"{settings.APP_NAME} queries; results in s3://<bucket>/{settings.ATHENA_RESULTS_PREFIX}",
            # Deleting the stack deletes the workgroup's saved queries and history too.
            recursive_delete_option=True,
            state="ENABLED",
            work_group_configuration=athena.CfnWorkGroup.WorkGroupConfigurationProperty(
                # Clients cannot send results elsewhere or unencrypted.
                enforce_work_group_configuration=True,
                publish_cloud_watch_metrics_enabled=True,
                bytes_scanned_cutoff_per_query=BYTES_SCANNED_CUTOFF,
                engine_version=athena.CfnWorkGroup.EngineVersionProperty(
                    selected_engine_version="Athena engine version 3"
                ),
                result_configuration=athena.CfnWorkGroup.ResultConfigurationProperty(
                    output_location=bucket.s3_url_for_object(settings.ATHENA_RESULTS_PREFIX),
                    encryption_configuration=athena.CfnWorkGroup.EncryptionConfigurationProperty(
                        encryption_option="SSE_S3"
                    ),
                ),
            ),
        )
        self.named_queries: dict[str, athena.CfnNamedQuery] = {}
        for name, (description, sql) in NAMED_QUERIES.items():
            query = athena.CfnNamedQuery(
                self,
                "".join(part.capitalize() for part in name.split("-")),
                name=name,
                description=description,
                database=self.database.ref,  # Ref: the name, and the dependency
                work_group=self.workgroup.ref,
                query_string=sql,
            )
            self.named_queries[name] = query

    def _table(self, bucket: s3.Bucket, name: str, prefix: str) -> glue.CfnTable:
        """The Glue table over ``prefix``, its columns as ``crawlstack.records.tables`` defines them for both."""
        location = bucket.s3_url_for_object(prefix.rstrip("/"))
        table = glue.CfnTable(
            self,
            f"{''.join(p.capitalize() for p in name.split('_'))}Table",
            catalog_id=Aws.ACCOUNT_ID,
            database_name=self.database.ref,
            table_input=glue.CfnTable.TableInputProperty(
                name=name,
                description=f"gzipped JSON lines under s3://<bucket>/{prefix}crawl_id=<id>/dt=<YYYY-MM-DD>/",
                table_type="EXTERNAL_TABLE",
                parameters={
                    "classification": "json",
                    "compressionType": "gzip",
                    "projection.enabled": "true",
                    "projection.crawl_id.type": "injected",
                    "projection.dt.type": "date",
                    "projection.dt.format": "yyyy-MM-dd",
                    "projection.dt.range": f"{PROJECTION_START},NOW",
                    "projection.dt.interval": "1",
                    "projection.dt.interval.unit": "DAYS",
                    "storage.location.template": f"{location}/crawl_id=${{crawl_id}}/dt=${{dt}}/",
                },
                partition_keys=[glue.CfnTable.ColumnProperty(name=c.name, type=c.type) for c in tables.PARTITION_KEYS],
                storage_descriptor=glue.CfnTable.StorageDescriptorProperty(
                    location=f"{location}/",
                    input_format=TEXT_INPUT,
                    output_format=TEXT_OUTPUT,
                    compressed=True,
                    columns=[glue.CfnTable.ColumnProperty(name=c.name, type=c.type) for c in tables.COLUMNS[name]],
                    serde_info=glue.CfnTable.SerdeInfoProperty(
                        serialization_library=JSON_SERDE,
                        # A line that is not JSON is skipped, not a failed query.
                        parameters={"ignore.malformed.json": "true"},
                    ),
                ),
            ),
        )
        return table
