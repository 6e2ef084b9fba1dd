"""The request path of `KubeCluster`: one HTTP exchange through the `kubernetes` client.

Owns: credentials (`ApiClient.param_serialize` adds them, running the config loaders' token
refresh hooks), timeouts, the retry policy, decoding answers into plain dicts with `json.loads`,
and mapping every error answer and transport failure onto `reconcile.errors`.
Promises: no urllib3 or kubernetes exception type leaves this module; a request is never retried
after the server answered it (the caller's back-off decides), only connection attempts are.
Does not: know resource URLs (cluster.py) or read streams (_watch.py).
"""

from __future__ import annotations

import copy
import http.client
import json
from collections.abc import Iterable
from http import HTTPStatus
from typing import Any

import urllib3
from kubernetes.client import ApiClient, Configuration
from kubernetes.client.exceptions import OpenApiException

from reconcile.cluster import Kind, Obj
from reconcile.errors import ApiError, BadRequest, ServerError, from_status, make_status

JSON = "application/json"
USER_AGENT = "porchkit-reconcile"

# urllib3's default policy would itself retry a GET answered 429 with Retry-After, sleeping in
# the caller's thread; here only failed connection attempts are retried.
RETRIES = urllib3.Retry(total=3, connect=3, read=0, status=0, backoff_factor=0.1, respect_retry_after_header=False,
                        raise_on_status=False)
# Connections kept open to the API server. The client's default (5 per CPU) is below what one
# manager has in flight on a small machine (the PackageVariant controller alone runs 32 workers,
# and every informer holds a watch), and a full pool drops a connection after each request.
POOL_SIZE = 64
TRANSPORT_ERRORS = (urllib3.exceptions.HTTPError, http.client.HTTPException, OSError, OpenApiException)


class Transport:
    """Sends requests to one API server; thread-safe (urllib3 pools the connections)."""

    def __init__(self, configuration: Configuration, *, timeout: tuple[float, float]) -> None:
        config = copy.deepcopy(configuration)
        if config.retries is None:
            config.retries = RETRIES
        config.connection_pool_maxsize = max(config.connection_pool_maxsize or 0, POOL_SIZE)
        self._api = ApiClient(config)
        self._api.user_agent = USER_AGENT
        self._timeout = timeout  # (connect, read) seconds

    @property
    def host(self) -> str:
        return str(self._api.configuration.host)

    def close(self) -> None:
        self._api.close()

    def request(self, method: str, path: str, *, query: Iterable[tuple[str, str]] = (), body: Any = None,
                content_type: str = JSON, accept: str = JSON) -> tuple[int, Obj]:
        """Send, read the whole answer and decode it: (status code, body); raises the mapped error."""
        return self.finish(self.send(method, path, query=query, body=body, content_type=content_type, accept=accept))

    def send(self, method: str, path: str, *, query: Iterable[tuple[str, str]] = (), body: Any = None,
             content_type: str = JSON, timeout: tuple[float, float] | None = None,
             accept: str = JSON) -> urllib3.BaseHTTPResponse:
        """The response with its body still unread (`finish` it or stream it); ServerError when the
        server cannot be reached, BadRequest when `body` is not JSON. `accept` may ask for another
        representation (PartialObjectMetadata, say)."""
        headers = {"Accept": accept, **({"Content-Type": content_type} if body is not None else {})}
        try:
            # the body stays out of param_serialize, so that nothing but json.dumps walks it
            _, url, headers, _, _ = self._api.param_serialize(method, path, query_params=list(query),
                                                             header_params=headers, auth_settings=["BearerToken"])
            answer = self._api.call_api(method, url, header_params=headers, body=body,
                                        _request_timeout=timeout or self._timeout)
        except TypeError as err:  # from json.dumps
            raise BadRequest(f"the request is not valid JSON: {err}") from err
        except TRANSPORT_ERRORS as err:
            raise unreachable(self.host, err) from err
        response: urllib3.BaseHTTPResponse = answer.response
        return response

    def finish(self, response: urllib3.BaseHTTPResponse) -> tuple[int, Obj]:
        """Read and decode a response's body, returning its connection to the pool."""
        try:
            data = response.read()
        except TRANSPORT_ERRORS as err:
            raise unreachable(self.host, err) from err
        finally:
            response.release_conn()
        if response.status >= 400:
            raise error_for(response.status, response.headers.get("Retry-After"), data)
        try:
            decoded = json.loads(data) if data else {}
        except ValueError as err:
            raise ServerError(f"the API server at {self.host} sent a body that is not JSON: {err}") from err
        if not isinstance(decoded, dict):
            raise ServerError(f"the API server at {self.host} sent a JSON {type(decoded).__name__}, not an object")
        return response.status, decoded


def error_for(code: int, retry_after: str | None, data: bytes) -> ApiError:
    """The error for an HTTP error answer: from its Status body, else from the code alone."""
    try:
        decoded = json.loads(data)
    except ValueError:
        decoded = None
    if isinstance(decoded, dict) and decoded.get("kind") == "Status":
        status = decoded if decoded.get("code") else {**decoded, "code": code}
    else:  # not from the API server itself (a proxy, a load balancer): keep a line of its text
        phrase = HTTPStatus(code).phrase if code in HTTPStatus._value2member_map_ else "Error"
        text = " ".join(data[:200].decode("utf-8", "replace").split())
        status = make_status(code, phrase.replace(" ", ""), f"{code} {phrase}" + (f": {text}" if text else ""))
    return status_error(status, retry_after)


def status_error(status: Obj, retry_after: str | None = None) -> ApiError:
    """The error for a `Status` (an error answer's body, or a watch ERROR event's object)."""
    seconds = None
    if retry_after:
        try:
            seconds = max(0.0, float(retry_after))
        except ValueError:
            seconds = None  # an HTTP date: the API server itself only sends seconds
    return from_status(status, retry_after=seconds)


def unreachable(host: str, err: BaseException) -> ServerError:
    """The error for a connection that failed (refused, reset, timed out, TLS)."""
    reason = " ".join(str(err).split())[:300] or type(err).__name__
    message = f"cannot reach the API server at {host}: {reason}"
    return ServerError(message, status=make_status(503, "ServiceUnavailable", message))


def with_kind(obj: Obj, kind: Kind) -> Obj:
    """`obj` with apiVersion and kind, which list items (and some answers) come without."""
    if "apiVersion" not in obj or "kind" not in obj:
        obj["apiVersion"], obj["kind"] = kind.api_version, kind.kind
    return obj
