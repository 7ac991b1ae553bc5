"""The handlers' X-Ray tracing provider, which imports the X-Ray SDK on first use instead of at cold start.

Powertools' ``Tracer`` imports ``aws_xray_sdk.core`` as it is built, whether
tracing is on or not, and with its defaults then patches every library the
SDK knows (``patch_all``).  Outside Lambda (local mode, tests, the CLI) the
SDK's recorder also builds two botocore X-Ray clients for its sampler.  At
module level in a handler that is all import time: about 130 ms of a
handler's import on this project's build host with tracing off, 15-50 ms in
Lambda with it on.

``LazyXRayProvider`` is a Powertools tracing provider (``Tracer(provider=...)``)
that defers all of it:

* with tracing on (Lambda, ``Tracing.ACTIVE``), the first subsegment of the
  container (the handler's, ``capture_lambda_handler``) imports the SDK,
  configures the recorder as Powertools does for its own X-Ray provider
  (``streaming_threshold=0``) and patches ``TRACED_MODULES``, all before the
  handler runs, so every AWS call a handler makes is traced as before.  The
  import moves from the container's init to its first invocation;
* with tracing off (``POWERTOOLS_TRACE_DISABLED``, or outside Lambda, which
  Powertools signals by disabling the SDK's ``global_sdk_config``), the SDK is
  never imported: subsegments are no-ops, as the SDK's own dummy segments are.

``TRACED_MODULES`` is what ``patch_all`` patched that the handlers use: only
botocore (boto3's calls to SQS, DynamoDB and S3).  The rest of ``patch_all``'s
list (requests, sqlite3, database drivers) is not used by the handlers;
trying each costs an import, or a failed one.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from contextlib import nullcontext
from typing import Any

from aws_lambda_powertools.tracing.base import BaseProvider, BaseSegment

# Libraries the X-Ray SDK patches when tracing is on (``Tracer(patch_modules=...)``).
TRACED_MODULES = ("botocore",)


class NoSegment(BaseSegment):
    """A subsegment that records nothing (tracing off)."""

    def close(self, end_time: int | None = None) -> None:
        pass

    def add_subsegment(self, subsegment: Any) -> None:
        pass

    def remove_subsegment(self, subsegment: Any) -> None:
        pass

    def put_annotation(self, key: str, value: Any) -> None:
        pass

    def put_metadata(self, key: str, value: Any, namespace: str = "default") -> None:
        pass

    def add_exception(self, exception: BaseException, stack: Any, remote: bool = False) -> None:
        pass


NO_SEGMENT = NoSegment()


class LazyXRayProvider(BaseProvider):
    """The X-Ray SDK's recorder, imported, configured and patched on first use, and never while tracing is off."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loaded: Any = None
        # What Tracer asked to patch (it does only while tracing is on): None, a list, or "all".
        self._patch: Sequence[str] | str | None = None

    def _recorder(self) -> Any:
        """The SDK's recorder, or None while tracing is off."""
        if self._loaded is not None:
            return self._loaded
        # The SDK's package alone is small: its enabled flag, which Tracer(disabled) turns off.
        from aws_xray_sdk import global_sdk_config

        if not global_sdk_config.sdk_enabled():
            return None
        with self._lock:
            if self._loaded is None:
                from aws_xray_sdk.core import patch, patch_all, xray_recorder

                # What Tracer does for its own X-Ray provider: send subsegments one by one.
                xray_recorder.configure(streaming_threshold=0)
                if self._patch == "all":
                    patch_all()
                elif self._patch is not None:
                    patch(self._patch)
                self._loaded = xray_recorder
        return self._loaded

    def in_subsegment(self, name: str | None = None, **kwargs: Any) -> Any:
        recorder = self._recorder()
        if recorder is None:
            return nullcontext(NO_SEGMENT)
        return recorder.in_subsegment(name=name, **kwargs)

    def in_subsegment_async(self, name: str | None = None, **kwargs: Any) -> Any:
        recorder = self._recorder()
        if recorder is None:
            return nullcontext(NO_SEGMENT)  # an async context manager too
        return recorder.in_subsegment_async(name=name, **kwargs)

    def put_annotation(self, key: str, value: Any) -> None:
        recorder = self._recorder()
        if recorder is not None:
            recorder.put_annotation(key=key, value=value)

    def put_metadata(self, key: str, value: Any, namespace: str = "default") -> None:
        recorder = self._recorder()
        if recorder is not None:
            recorder.put_metadata(key=key, value=value, namespace=namespace)

    def patch(self, modules: Sequence[str]) -> None:
        self._patch_on_load(tuple(modules))

    def patch_all(self) -> None:
        self._patch_on_load("all")

    def _patch_on_load(self, what: Sequence[str] | str) -> None:
        with self._lock:
            loaded = self._loaded is not None
            if not loaded:
                self._patch = what
        if loaded:  # already in use: patch now, as the SDK's provider would
            from aws_xray_sdk.core import patch, patch_all

            if what == "all":
                patch_all()
            else:
                patch(what)
