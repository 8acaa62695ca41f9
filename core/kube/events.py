"""Best-effort Events, aggregated like client-go's two recorders.

Each component records through the API its upstream uses: `api=EVENTS_API` (events.k8s.io/v1,
client-go's tools/events, as kube-scheduler does: `eventTime`, `series`, no lastTimestamp) or
`api=CORE_API` (core/v1, client-go's tools/record, as Volcano's controllers and
kube-controller-manager do: `firstTimestamp`, `lastTimestamp`, `count`, `source.component`;
what `kubectl get events --sort-by=.lastTimestamp` sorts on).

`EventRecorder.record()` never waits: it updates an in-memory series and queues its key; the
background `run()` writes. A repeat of an identical event (same regarding object, reason, type,
note, action; the reporting controller/instance are the recorder's) within `series_window` of its
last occurrence patches the existing object's `series {count, lastObservedTime}` instead of
creating another; repeats that arrive while a write is pending collapse into one write.

A per-object token bucket (client-go's EventSourceObjectSpamFilter: burst 25, then one per five
minutes) caps how many *new* Event objects one object can produce, so a crash-looping object
cannot flood etcd. Failed writes are retried a few times with backoff, then logged and dropped.

Writes can be paced by a token bucket of their own (`qps`, `burst`: kubelet's `--event-qps` and
`--event-burst`), so that a burst of events (one per member of a 1,000-pod gang) does not compete
with the writes that schedule pods; the events wait in the queue, with their times as recorded.

`record(..., important=True)` puts an event in a lane of its own, with its own writer and its own
cache: a burst of ordinary events (a 100-member gang's 100 `GangCommitted`) can neither delay it
nor push it out unwritten (its PodGroup's one `GangCommitted`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from core.kube.backoff import TokenBucket
from core.kube.client import EVENTS, MERGE_PATCH, ApiError, KubeClient, Resource
from core.kube.workqueue import WorkQueue

log = logging.getLogger("vulcan.kube.events")

EVENTS_API = "events.k8s.io/v1"
CORE_API = "v1"
CORE_EVENTS = Resource("", "v1", "events", True, "Event")

NORMAL = "Normal"
WARNING = "Warning"
EVENT_TYPES = (NORMAL, WARNING)

NOTE_LIMIT = 1024  # bytes; the API server rejects longer notes
FIELD_LIMIT = 128  # reason and action
NAME_LIMIT = 253
SERIES_WINDOW = 6 * 60.0  # client-go's finishTime: a series ends after 6 idle minutes
SPAM_BURST = 25
SPAM_REFILL = 5 * 60.0  # seconds per token after the burst
CACHE_SIZE = 4096  # series and spam buckets remembered (client-go's LRU size)
_REFERENCE_FIELDS = (
    "apiVersion",
    "kind",
    "namespace",
    "name",
    "uid",
    "resourceVersion",
    "fieldPath",
)


def micro_time(ts: float | None = None) -> str:
    """A Kubernetes MicroTime: RFC 3339 with microseconds, UTC (`2006-01-02T15:04:05.000000Z`)."""
    moment = datetime.fromtimestamp(time.time() if ts is None else ts, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def kube_time(ts: float) -> str:
    """A Kubernetes Time (core/v1 first/lastTimestamp): RFC 3339, whole seconds, UTC."""
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def object_reference(obj: Mapping[str, Any], field_path: str = "") -> dict[str, str]:
    """The `regarding` reference for a full API object."""
    meta = obj.get("metadata") or {}
    ref = {
        "apiVersion": obj.get("apiVersion", ""),
        "kind": obj.get("kind", ""),
        "namespace": meta.get("namespace", ""),
        "name": meta.get("name", ""),
        "uid": meta.get("uid", ""),
        "fieldPath": field_path,
    }
    return {k: v for k, v in ref.items() if v}


def _reference(ref: Mapping[str, Any]) -> dict[str, str]:
    return {k: str(ref[k]) for k in _REFERENCE_FIELDS if ref.get(k)}


def _truncate_bytes(text: str, limit: int) -> str:
    encoded = text.encode()
    if len(encoded) <= limit:
        return text
    # Cut on a character boundary and mark the cut, staying within the byte limit.
    return encoded[: limit - 3].decode(errors="ignore") + "..."


@dataclass(slots=True)
class _Series:
    """One Event object and how far the API server has caught up with it."""

    name: str
    namespace: str
    fields: dict[str, Any]  # everything but name, series and eventTime
    first_seen: float  # wall clock
    last_seen: float  # wall clock
    count: int = 1
    written: int = 0  # the count the API server has; 0 = not created yet


@dataclass(slots=True)
class _Bucket:
    tokens: float
    stamp: float


@dataclass(slots=True)
class RecorderStats:
    created: int = 0
    patched: int = 0
    aggregated: int = 0  # records folded into an existing series
    spam_dropped: int = 0
    failed: int = 0  # events given up on
    overflowed: int = 0  # recorded but pushed out of the cache before they could be written


SeriesKey = tuple[Any, ...]


@dataclass(slots=True)
class _Lane:
    """Series remembered (least recently recorded first) and the keys waiting to be written."""

    series: OrderedDict[SeriesKey, _Series]
    queue: WorkQueue[SeriesKey]
    workers: int


class EventRecorder:
    """`record()` from anywhere on the loop; keep `run()` running as a background task."""

    def __init__(
        self,
        client: KubeClient,
        component: str,
        instance: str,
        *,
        series_window: float = SERIES_WINDOW,
        spam_burst: int = SPAM_BURST,
        spam_refill: float = SPAM_REFILL,
        max_retries: int = 3,
        retry_base: float = 0.1,
        retry_max: float = 10.0,
        workers: int = 2,
        qps: float = 0.0,
        burst: int = 100,
        clock: Any = time.time,
        api: str = EVENTS_API,
    ) -> None:
        if api not in (EVENTS_API, CORE_API):
            raise ValueError(f"events API must be {EVENTS_API} or {CORE_API}, not {api!r}")
        self.client = client
        self.api = api
        self.resource = CORE_EVENTS if api == CORE_API else EVENTS
        self.component = component
        self.instance = instance
        self.series_window = series_window
        self.spam_burst = spam_burst
        self.spam_refill = spam_refill
        self.max_retries = max_retries
        self.workers = workers
        # Paces writes (creates and series patches) when qps > 0; 0 writes as fast as the
        # client allows.
        self.limiter = TokenBucket(qps, burst)
        self.stats = RecorderStats()
        self._clock = clock
        self._buckets: OrderedDict[tuple[str, ...], _Bucket] = OrderedDict()
        self._lanes = {
            important: _Lane(
                OrderedDict(),
                WorkQueue(name, base_delay=retry_base, max_delay=retry_max),
                1 if important else workers,
            )
            for important, name in ((False, "events"), (True, "important-events"))
        }
        self._last_name_ns = 0

    # ------------------------------------------------------------------------ recording

    def record(
        self,
        regarding: Mapping[str, Any],
        type_: str,
        reason: str,
        note: str,
        action: str = "",
        related: Mapping[str, Any] | None = None,
        *,
        important: bool = False,
    ) -> None:
        """Queue an event about `regarding` (kind, namespace, name, uid, apiVersion). Never
        blocks and never raises for API trouble; an unknown `type_` is a programming error.
        `important`: written in the lane of the few events a burst must not drown (above)."""
        if type_ not in EVENT_TYPES:
            raise ValueError(f"event type must be Normal or Warning, not {type_!r}")
        ref = _reference(regarding)
        reason = reason[:FIELD_LIMIT]
        # events.k8s.io/v1 requires an action; the reason is the closest description of one.
        action = (action or reason)[:FIELD_LIMIT]
        note = _truncate_bytes(note, NOTE_LIMIT)
        rel = _reference(related) if related else None
        key: SeriesKey = (
            tuple(sorted(ref.items())),
            tuple(sorted(rel.items())) if rel else (),
            type_,
            reason,
            action,
            note,
        )
        now = self._clock()
        lane = self._lanes[important]
        series = lane.series.get(key)
        if series is not None and now - series.last_seen <= self.series_window:
            series.count += 1
            series.last_seen = now
            lane.series.move_to_end(key)
            self.stats.aggregated += 1
        else:
            if not self._allow_new(ref, now):
                self.stats.spam_dropped += 1
                log.debug(
                    "event dropped by the spam filter", extra={"regarding": ref, "reason": reason}
                )
                return
            fields: dict[str, Any] = {
                "reportingController": self.component,
                "reportingInstance": self.instance,
                "action": action,
                "reason": reason,
                "note": note,
                "type": type_,
                "regarding": ref,
            }
            if rel:
                fields["related"] = rel
            series = _Series(
                name=self._new_name(ref.get("name", "")),
                namespace=ref.get("namespace") or "default",  # cluster-scoped objects
                fields=fields,
                first_seen=now,
                last_seen=now,
            )
            lane.series[key] = series
            lane.series.move_to_end(key)
            self._evict_series(lane.series)
        lane.queue.add(key)

    def _allow_new(self, ref: Mapping[str, str], now: float) -> bool:
        """Take a token from the regarding object's bucket (refilled one per spam_refill)."""
        bucket_key = tuple(ref.get(k, "") for k in ("kind", "namespace", "name", "uid"))
        bucket = self._buckets.get(bucket_key)
        if bucket is None:
            bucket = self._buckets[bucket_key] = _Bucket(float(self.spam_burst), now)
            self._evict(self._buckets)
        else:
            self._buckets.move_to_end(bucket_key)
            if self.spam_refill > 0:
                refill = (now - bucket.stamp) / self.spam_refill
                bucket.tokens = min(float(self.spam_burst), bucket.tokens + refill)
            bucket.stamp = now
        if bucket.tokens < 1:
            return False
        bucket.tokens -= 1
        return True

    def _evict_series(self, remembered: OrderedDict[SeriesKey, _Series]) -> None:
        """Forget the least recently recorded series beyond the cache size. One not written
        yet is lost: events are best-effort (client-go drops them when its queue is full too),
        but never silently."""
        while len(remembered) > CACHE_SIZE:
            _, series = remembered.popitem(last=False)
            if series.written == 0:
                self.stats.overflowed += 1
                if self.stats.overflowed % 1000 == 1:
                    log.warning(
                        "events are recorded faster than they can be written; dropping the "
                        "oldest unwritten ones",
                        extra={"dropped": self.stats.overflowed, "qps": self.limiter.qps},
                    )

    @staticmethod
    def _evict(cache: OrderedDict[Any, Any]) -> None:
        while len(cache) > CACHE_SIZE:
            cache.popitem(last=False)

    def _new_name(self, regarding_name: str) -> str:
        # client-go names events <regarding>.<unix nanos in hex>; bump so names from one
        # recorder never collide even within one clock tick.
        stamp = max(time.time_ns(), self._last_name_ns + 1)
        self._last_name_ns = stamp
        prefix = regarding_name[: NAME_LIMIT - 17] or "event"
        return f"{prefix}.{stamp:016x}"

    # ------------------------------------------------------------------------ writing

    async def run(self) -> None:
        """Write queued events until `close()` (or cancellation)."""
        await asyncio.gather(*(self._run_lane(lane) for lane in self._lanes.values()))

    async def _run_lane(self, lane: _Lane) -> None:
        async def sync(key: SeriesKey) -> None:
            await self._sync(lane.series.get(key))

        def give_up(key: SeriesKey, exc: BaseException) -> None:
            self._give_up(lane.series.get(key), exc)

        await lane.queue.run_workers(
            lane.workers, sync, max_retries=self.max_retries, on_give_up=give_up
        )

    async def flush(self) -> None:
        """Wait until every recorded event was written or given up (needs `run()` running)."""
        for lane in self._lanes.values():
            await lane.queue.wait_idle()

    async def close(self) -> None:
        """Stop accepting events; the writes in flight finish, the rest are dropped."""
        for lane in self._lanes.values():
            await lane.queue.shutdown()

    async def _sync(self, series: _Series | None) -> None:
        if series is None:
            return  # evicted from the cache: nothing we can still say about it
        if series.written != 0 and series.count <= series.written:
            return  # already written (a repeat folded in before its write)
        await self.limiter.acquire()
        if series.written == 0:
            await self._create(series)
        else:
            await self._patch_series(series)

    def _body(self, series: _Series, count: int) -> dict[str, Any]:
        if self.api == CORE_API:
            return self._core_body(series, count)
        body: dict[str, Any] = {
            "apiVersion": EVENTS.api_version,
            "kind": EVENTS.kind,
            "metadata": {"name": series.name, "namespace": series.namespace},
            "eventTime": micro_time(series.first_seen),
            **series.fields,
        }
        if count > 1:
            body["series"] = {"count": count, "lastObservedTime": micro_time(series.last_seen)}
        return body

    def _core_body(self, series: _Series, count: int) -> dict[str, Any]:
        """client-go record's Event: involvedObject/message/source, first and last timestamps
        and a count (no eventTime, no series)."""
        fields = series.fields
        body: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": series.name, "namespace": series.namespace},
            "involvedObject": fields["regarding"],
            "reason": fields["reason"],
            "message": fields["note"],
            "type": fields["type"],
            "source": {"component": self.component},
            "firstTimestamp": kube_time(series.first_seen),
            "lastTimestamp": kube_time(series.last_seen),
            "count": count,
            "eventTime": None,  # as Go writes a zero MicroTime (no omitempty on a struct)
            "reportingComponent": self.component,
            "reportingInstance": self.instance,
        }
        if "related" in fields:
            body["related"] = fields["related"]
        return body

    def _repeat_patch(self, series: _Series, count: int) -> dict[str, Any]:
        if self.api == CORE_API:
            # client-go's EventCorrelator patches the count and lastTimestamp of a repeat.
            return {"count": count, "lastTimestamp": kube_time(series.last_seen)}
        return {"series": {"count": count, "lastObservedTime": micro_time(series.last_seen)}}

    async def _create(self, series: _Series) -> None:
        count = series.count
        try:
            # No client-level retries: the queue retries with its own backoff, and a dead API
            # server must not pin a worker for the client's whole retry budget.
            await self.client.request(
                "POST",
                self.resource.path(series.namespace),
                body=self._body(series, count),
                retry=False,
            )
        except ApiError as exc:
            if exc.conflict:
                series.name = self._new_name(series.fields["regarding"].get("name", ""))
                raise  # a name collision: retry under the new name
            self._raise_if_retryable(series, exc)
            return
        series.written = count
        self.stats.created += 1
        log.debug("event created", extra={"event": series.name, "reason": series.fields["reason"]})

    async def _patch_series(self, series: _Series) -> None:
        count = series.count
        patch = self._repeat_patch(series, count)
        try:
            await self.client.request(
                "PATCH",
                self.resource.path(series.namespace, series.name),
                body=patch,
                content_type=MERGE_PATCH,
                retry=False,
            )
        except ApiError as exc:
            if exc.not_found:
                # The event expired (the API server's event TTL) or was deleted: start afresh
                # under a new name, carrying the count so far.
                series.written = 0
                series.name = self._new_name(series.fields["regarding"].get("name", ""))
                await self._create(series)
                return
            self._raise_if_retryable(series, exc)
            return
        series.written = count
        self.stats.patched += 1

    def _raise_if_retryable(self, series: _Series, exc: ApiError) -> None:
        if exc.retryable:
            raise exc
        # 4xx other than conflicts: retrying cannot help (RBAC, validation).
        self.stats.failed += 1
        log.warning(
            "event refused; dropping it",
            extra={"event": series.name, "reason": series.fields["reason"], "error": str(exc)},
        )

    def _give_up(self, series: _Series | None, exc: BaseException) -> None:
        self.stats.failed += 1
        log.warning(
            "could not write event; dropping it",
            extra={"event": series.name if series else "", "error": str(exc)},
        )
