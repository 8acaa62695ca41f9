"""The embedded API server's reads: lists (whole, streamed in chunks when big, or paginated with
`limit` and `continue`), watches (resume, 410 Expired, bookmarks, watch-list), the label and field
selectors that filter both, and the Table form kubectl asks for.

Separate from the writes (`sim.apiserver.routes_write`): this is the read hot path (a list of
100,000 pods, every watch event of every watcher) and only reads the store. `ApiServer`
(`sim.apiserver.routes`) dispatches GETs here.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
from typing import Any

import orjson
from aiohttp import web

from sim.apiserver import errors
from sim.apiserver.registry import ResourceType
from sim.apiserver.routes_common import JSON, Target, _flag, _json_response
from sim.apiserver.selectors import SelectorError, parse_field_selector, parse_label_selector
from sim.apiserver.store import Matcher, Store
from sim.apiserver.tables import table, wants_table

DEFAULT_WATCH_TIMEOUT = 1800  # the real server's --min-request-timeout
_LIST_CHUNK = 2000  # objects per write when streaming a big list


class ReadRoutes:
    """`ApiServer`'s list and watch handlers."""

    # Provided by ApiServer.
    store: Store
    bookmark_interval: float

    # --------------------------------------------------------------------------- lists

    def _matcher(self, request: web.Request, rtype: ResourceType) -> Matcher | None:
        from sim.apiserver.objects import selectable_fields

        labels_text = request.query.get("labelSelector", "")
        fields_text = request.query.get("fieldSelector", "")
        if not labels_text and not fields_text:
            return None
        try:
            label_sel = parse_label_selector(labels_text) if labels_text else None
            field_sel = parse_field_selector(fields_text) if fields_text else None
        except SelectorError as exc:
            raise errors.bad_request(str(exc)) from None
        if field_sel is not None:
            supported = set(selectable_fields(rtype))
            for name in sorted(field_sel.fields()):
                if name not in supported:
                    raise errors.bad_request(f"field label not supported: {name}")

        def matches(labels: dict[str, str] | None, fields: dict[str, str]) -> bool:
            if label_sel is not None and not label_sel.matches(labels):
                return False
            return field_sel is None or field_sel.matches(fields)

        return matches

    async def _list(self, request: web.Request, t: Target) -> web.StreamResponse:
        limit_text = request.query.get("limit", "")
        matcher = self._matcher(request, t.rtype)
        if limit_text not in ("", "0"):
            try:
                limit = int(limit_text)
            except ValueError:
                raise errors.bad_request(f"invalid limit: {limit_text}") from None
            return self._list_page(request, t, matcher, limit)
        rv, items = self.store.list(t.storage, t.namespace, matcher)
        if wants_table(request.headers.get("Accept", "")):
            return _json_response(
                orjson.dumps(
                    table(
                        t.rtype,
                        (s.decode() for s in items),
                        str(rv),
                        request.query.get("includeObject", "Metadata"),
                        t.served,
                    )
                )
            )
        # `limit` is not honoured: the whole list comes in one page, as the real server does
        # when it serves a list from its watch cache; clients handle that (no continue token).
        head = orjson.dumps(
            {
                "kind": t.rtype.list_kind,
                "apiVersion": t.rtype.api_version,
                "metadata": {"resourceVersion": str(rv)},
            }
        )
        opening = head[:-1] + b',"items":['
        raws = [t.out(s.raw) for s in items] if t.view is not None else [s.raw for s in items]
        if len(raws) <= _LIST_CHUNK:
            return _json_response(opening + b",".join(raws) + b"]}")
        # A big list (100,000 pods is ~200 MB) is streamed in chunks from the snapshot taken
        # above, so the event loop keeps serving other clients and no second copy is built.
        response = web.StreamResponse(headers={"Content-Type": JSON})
        response.content_length = len(opening) + sum(len(r) for r in raws) + len(raws) - 1 + 2
        await response.prepare(request)
        await response.write(opening)
        for start in range(0, len(raws), _LIST_CHUNK):
            chunk = b",".join(raws[start : start + _LIST_CHUNK])
            await response.write(chunk if start == 0 else b"," + chunk)
        await response.write(b"]}")
        await response.write_eof()
        return response

    def _list_page(
        self, request: web.Request, t: Target, matcher: Matcher | None, limit: int
    ) -> web.Response:
        """One page of a paginated list (`limit` + `continue`), in key order. The continue token
        carries the first page's resourceVersion, which every page reports, as Kubernetes does;
        later pages show the current objects (there is no MVCC snapshot to read from)."""
        token = request.query.get("continue", "")
        try:
            start = decode_continue(token) if token else None
        except ValueError:
            raise errors.bad_request(f"invalid continue token: {token}") from None
        list_rv, items, next_key = self.store.list_page(
            t.storage,
            t.namespace,
            matcher,
            limit,
            after=None if start is None else start[1],
            list_rv=None if start is None else start[0],
        )
        meta: dict[str, Any] = {"resourceVersion": str(list_rv)}
        if next_key is not None:
            meta["continue"] = encode_continue(list_rv, next_key)
        if wants_table(request.headers.get("Accept", "")):
            rendered = table(
                t.rtype,
                (s.decode() for s in items),
                str(list_rv),
                request.query.get("includeObject", "Metadata"),
                t.served,
            )
            rendered["metadata"] = meta
            return _json_response(orjson.dumps(rendered))
        head = orjson.dumps(
            {"kind": t.rtype.list_kind, "apiVersion": t.rtype.api_version, "metadata": meta}
        )
        return _json_response(
            head[:-1] + b',"items":[' + b",".join(t.out(s.raw) for s in items) + b"]}"
        )

    # --------------------------------------------------------------------------- watch

    async def _watch(self, request: web.Request, t: Target) -> web.StreamResponse:
        matcher = self._matcher(request, t.rtype)
        timeout = request.query.get("timeoutSeconds")
        try:
            seconds = float(timeout) if timeout else DEFAULT_WATCH_TIMEOUT
        except ValueError:
            raise errors.bad_request(f"invalid timeoutSeconds: {timeout}") from None
        bookmarks = _flag(request, "allowWatchBookmarks")
        send_initial = _flag(request, "sendInitialEvents")
        response = web.StreamResponse(headers={"Content-Type": JSON})
        response.enable_chunked_encoding()
        try:
            watcher, first = self.store.watch(
                t.storage,
                t.namespace,
                matcher,
                request.query.get("resourceVersion"),
                send_initial,
            )
        except errors.ApiError as exc:
            if exc.code != 410:
                raise
            # An expired version is reported inside the stream, as an ERROR event.
            await response.prepare(request)
            await response.write(b'{"type":"ERROR","object":' + exc.body() + b"}\n")
            return response
        loop = asyncio.get_running_loop()
        deadline = loop.time() + seconds
        as_table = wants_table(request.headers.get("Accept", ""))

        def encode(chunk: bytes) -> bytes:
            if as_table:
                return _table_events(t.rtype, chunk)
            return t.view.out_lines(chunk) if t.view is not None else chunk

        try:
            await response.prepare(request)
            if first:
                await response.write(encode(b"".join(first)))
            while not watcher.closed:
                remaining = deadline - loop.time()
                if remaining <= 0:
                    break
                try:
                    await asyncio.wait_for(
                        watcher.wakeup.wait(), timeout=min(remaining, self.bookmark_interval)
                    )
                except TimeoutError:
                    if bookmarks and deadline - loop.time() > 0:
                        await response.write(self.store.bookmark(t.rtype))
                    continue
                chunk = watcher.drain()
                if chunk:
                    await response.write(encode(chunk))
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            self.store.unwatch(t.storage, watcher)
        with contextlib.suppress(ConnectionResetError):
            await response.write_eof()
        return response


def encode_continue(list_rv: int, last_key: tuple[str, str]) -> str:
    return base64.urlsafe_b64encode(orjson.dumps([list_rv, *last_key])).decode()


def decode_continue(token: str) -> tuple[int, tuple[str, str]]:
    try:
        rv, namespace, name = orjson.loads(base64.urlsafe_b64decode(token.encode()))
        return int(rv), (str(namespace), str(name))
    except Exception as exc:
        raise ValueError(token) from exc


def _table_events(rtype: ResourceType, chunk: bytes) -> bytes:
    """Watch events for kubectl's table printer: each object becomes a one-row Table."""
    out = []
    for line in chunk.splitlines():
        event = orjson.loads(line)
        obj = event["object"]
        if event["type"] in ("ADDED", "MODIFIED", "DELETED"):
            event["object"] = table(rtype, [obj], obj["metadata"].get("resourceVersion", ""))
        out.append(orjson.dumps(event) + b"\n")
    return b"".join(out)
