"""The errors of the reconcile runtime, mapped from Kubernetes API statuses.

    ReconcileError                 base; str() is one line for a person
    ├── ApiError                   an API server (real or embedded) refused a request
    │   ├── BadRequest      400    ├── Conflict        409 (stale resourceVersion, precondition)
    │   ├── Unauthorized    401    ├── AlreadyExists   409 (create of an existing name)
    │   ├── Forbidden       403    ├── Gone            410 (watch resourceVersion too old)
    │   ├── NotFound        404    ├── Invalid         422
    │   ├── MethodNotAllowed 405   ├── TooManyRequests 429 (retry_after seconds)
    │   └── ServerError     5xx
    ├── NotLeading                 fenced: this replica cannot prove it still holds its Lease (fencing.py)
    ├── StateInUse                 another process holds the embedded cluster's state directory
    └── Terminal                   a reconcile failure not worth retrying (recorded, not requeued)

Both cluster backends raise these same classes carrying the same `Status` payload, so no caller
ever sees a transport's exception type.

Any of them may be `deterministic`: the same input gives the same error (a hook's answer that
cannot be used, a resource that is not served). Unlike Terminal, it is retried by a manager, since
something outside the input may still change (the hook is redeployed, a CRD installed); a one-off
run, where nothing else changes, reports it at once instead (controller.py). An error raised
`from` a deterministic one is deterministic too (`is_deterministic`).

`one_line(message)` is how every command prints an error's message: one line, and no value the
input made huge (a 200,000-character name) repeated whole.
"""

from __future__ import annotations

import re
from typing import Any

LONGEST_WORD = 500  # characters of one unbroken run a printed message keeps (a path, ns/name: all of it)
_LONG_WORD = re.compile(rf"\S{{{LONGEST_WORD + 1},}}")
_KEPT = 100  # characters of a cut run shown
_CLOSING = frozenset(":;,.)]}'\"")


class ReconcileError(Exception):
    """Base of every error the runtime raises on purpose; `deterministic` as the module docstring
    says (a class sets it for all its errors, `deterministic=` for one)."""

    deterministic = False

    def __init__(self, message: str, *, deterministic: bool | None = None) -> None:
        super().__init__(message)
        self.message = " ".join(message.split())
        if deterministic is not None:
            self.deterministic = deterministic

    def __str__(self) -> str:
        return self.message


class ApiError(ReconcileError):
    """A request the API server refused; `status` is the Kubernetes `Status` object it sent."""

    code = 500
    reason = "InternalError"

    def __init__(self, message: str, *, status: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.status = status or make_status(self.code, self.reason, message)


class BadRequest(ApiError):
    code, reason = 400, "BadRequest"


class Unauthorized(ApiError):
    code, reason = 401, "Unauthorized"


class Forbidden(ApiError):
    code, reason = 403, "Forbidden"


class NotFound(ApiError):
    code, reason = 404, "NotFound"


class MethodNotAllowed(ApiError):
    code, reason = 405, "MethodNotAllowed"


class Conflict(ApiError):
    code, reason = 409, "Conflict"


class AlreadyExists(Conflict):
    code, reason = 409, "AlreadyExists"


class Gone(ApiError):
    code, reason = 410, "Expired"


class Invalid(ApiError):
    code, reason = 422, "Invalid"


class TooManyRequests(ApiError):
    code, reason = 429, "TooManyRequests"

    def __init__(self, message: str, *, status: dict[str, Any] | None = None, retry_after: float = 1.0) -> None:
        super().__init__(message, status=status)
        self.retry_after = retry_after


class ServerError(ApiError):
    code, reason = 500, "InternalError"


class NotLeading(ReconcileError):
    """A write or hook call refused because this replica cannot prove it still holds its Lease
    (the renew deadline passed since its last successful renewal). Not an ApiError: code that
    handles the server's refusals must not swallow it, and nothing was sent."""


class StateInUse(ReconcileError):
    """The embedded cluster's state directory is held by another process (or another cluster in
    this one); str() names the directory and the holder's pid, host and start time."""


class Terminal(ReconcileError):
    """Raised by a reconciler for a failure that retrying cannot fix (an invalid spec, say): the
    runtime records it and waits for the object to change instead of backing off and retrying."""


def one_line(message: str) -> str:
    """`message` on one line (whitespace runs become one space), other control characters
    escaped as `\\xNN` (an ESC from an object's name must not drive the terminal), each run of more
    than LONGEST_WORD characters without a space cut to its start and its length."""
    return _LONG_WORD.sub(_shortened, _CONTROL.sub(_escaped, " ".join(message.split())))


_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")


def _escaped(match: re.Match[str]) -> str:
    return f"\\x{ord(match.group()):02x}"


def _shortened(match: re.Match[str]) -> str:
    word = match.group()
    end = word[-1] if word[-1] in _CLOSING else ""  # the `:` after a name still separates what follows
    return f"{word[:_KEPT]}...({len(word):,} characters){end}"



def is_deterministic(err: BaseException) -> bool:
    """Whether `err`, or an error it was raised from (its `__cause__` chain), is deterministic."""
    cause: BaseException | None = err
    seen: set[int] = set()
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, ReconcileError) and cause.deterministic:
            return True
        seen.add(id(cause))
        cause = cause.__cause__
    return False


_BY_REASON: dict[str, type[ApiError]] = {cls.reason: cls for cls in (
    BadRequest, Unauthorized, Forbidden, NotFound, MethodNotAllowed, Conflict, AlreadyExists, Gone, Invalid,
    TooManyRequests)}
_BY_CODE: dict[int, type[ApiError]] = {400: BadRequest, 401: Unauthorized, 403: Forbidden, 404: NotFound,
                                       405: MethodNotAllowed, 409: Conflict, 410: Gone, 422: Invalid,
                                       429: TooManyRequests}


def make_status(code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> dict[str, Any]:
    """A `Status` object as the API server sends it with an error."""
    status: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                              "message": message, "reason": reason, "code": code}
    if details:
        status["details"] = details
    return status


def from_status(status: dict[str, Any], *, retry_after: float | None = None) -> ApiError:
    """The error class for a `Status` payload (by reason, then by code)."""
    code = int(status.get("code") or 500)
    cls = _BY_REASON.get(str(status.get("reason") or "")) or _BY_CODE.get(code) or ServerError
    message = str(status.get("message") or f"request failed with status {code}")
    if cls is TooManyRequests:
        return TooManyRequests(message, status=status, retry_after=retry_after or 1.0)
    return cls(message, status=status)
