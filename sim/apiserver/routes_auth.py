"""Authorization of each request (`sim.apiserver.rbac`, when the server has a token file) and
SelfSubjectAccessReview (`kubectl auth can-i`): the request's attributes from its method and
target, refusals with kube-apiserver's 403 text."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import orjson
from aiohttp import web

from sim.apiserver import errors
from sim.apiserver.rbac import Attributes, Rbac, forbidden_message
from sim.apiserver.routes_common import Target, _error_response, _flag, _json_response

_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch"}


def attributes(request: web.Request, target: Target | None) -> Attributes:
    """What the request asks, as an authorizer sees it (discovery documents: a path)."""
    method = request.method
    if target is None:
        return Attributes(verb=method.lower(), path=request.path, resource_request=False)
    if method == "GET":
        verb = "get" if target.name else ("watch" if _flag(request, "watch") else "list")
    elif method == "DELETE":
        verb = "delete" if target.name else "deletecollection"
    else:
        verb = _VERBS.get(method, method.lower())
    return Attributes(
        verb=verb,
        api_group=target.rtype.group,
        resource=target.rtype.plural,
        subresource=target.subresource or "",
        namespace=target.namespace or "",
        name=target.name or "",
    )


class AuthRoutes:
    # Provided by ApiServer.
    rbac: Rbac | None

    if TYPE_CHECKING:

        async def _body(self, request: web.Request) -> Any: ...

    def _check(self, request: web.Request, target: Target | None) -> None:
        """Raise 403 unless the request's user may do what it asks (no-op without RBAC)."""
        rbac = self.rbac
        if rbac is None:
            return
        user = rbac.authenticate(request.headers.get("Authorization", ""))
        attrs = attributes(request, target)
        if not rbac.authorize(user, attrs):
            raise errors.ApiError(
                403,
                "Forbidden",
                forbidden_message(user, attrs),
                name=attrs.name or None,
                group=attrs.api_group,
                kind=attrs.resource or None,
            )

    async def _self_subject_access_review(self, request: web.Request) -> web.StreamResponse:
        """POST authorization.k8s.io/v1 selfsubjectaccessreviews: may I? (`kubectl auth
        can-i`). Without RBAC everything is allowed."""
        try:
            review = await self._body(request)
            spec = review.get("spec") or {}
            resource = spec.get("resourceAttributes")
            if resource is not None:
                attrs = Attributes(
                    verb=resource.get("verb", ""),
                    api_group=resource.get("group", ""),
                    resource=resource.get("resource", ""),
                    subresource=resource.get("subresource", ""),
                    namespace=resource.get("namespace", ""),
                    name=resource.get("name", ""),
                )
            else:
                other = spec.get("nonResourceAttributes") or {}
                attrs = Attributes(
                    verb=other.get("verb", ""), path=other.get("path", ""), resource_request=False
                )
            rbac = self.rbac
            allowed = True
            if rbac is not None:
                user = rbac.authenticate(request.headers.get("Authorization", ""))
                # A question, not a request: what it asks is not done, so not audited as done.
                allowed = rbac.authorize(user, attrs, audit=False)
            answer = {
                "kind": "SelfSubjectAccessReview",
                "apiVersion": "authorization.k8s.io/v1",
                "metadata": {},
                "spec": spec,
                "status": {"allowed": allowed},
            }
            return _json_response(orjson.dumps(answer), 201)
        except errors.ApiError as exc:
            return _error_response(exc)
