"""The errors the git layer of the embedded Porch raises on purpose (re-exported by git/repository.py).

    PorchVariantError
    └── GitRepositoryError   base; str() is one line for a person
        ├── GitNotFound         no such repository, branch or package revision
        ├── GitConflict         a ref moved (or appeared) since it was read; re-read and retry
        ├── GitInvalidRequest   the request can never succeed as asked (wrong lifecycle, bad name,
        │                    no Kptfile, a checked-out branch git refuses to move)
        ├── GitCommandError  git itself failed unexpectedly; carries the command and stderr
        └── RemoteError      a git server could not be used (unreachable, authentication, TLS, a
                             refusal, a missing Secret); carries a condition `reason`. Nothing
                             was changed, neither there nor here

The API layer maps them as an API server would: GitNotFound → 404, GitConflict → 409, GitInvalidRequest →
422, anything else (RemoteError too) → 500.
"""

from __future__ import annotations

from collections.abc import Sequence

from porchvariant.errors import PorchVariantError


class GitRepositoryError(PorchVariantError):
    """Base of every error the git layer raises on purpose."""


class GitNotFound(GitRepositoryError):
    """The repository, its branch or the package revision does not exist."""


class GitConflict(GitRepositoryError):
    """A ref is not where the caller last saw it (another writer won): nothing was changed."""


class GitInvalidRequest(GitRepositoryError):
    """The request is not valid for this revision or name; retrying it cannot help."""


class GitCommandError(GitRepositoryError):
    """`git` exited non-zero where it should not have."""

    def __init__(self, args: Sequence[str], returncode: int, stderr: str) -> None:
        self.args_, self.returncode, self.stderr = list(args), returncode, stderr
        # The last line of stderr is git's own summary ("fatal: ..."); the rest stays on .stderr.
        last = stderr.strip().splitlines()[-1] if stderr.strip() else "no message"
        super().__init__(f"git {' '.join(args[:2])} failed ({returncode}): {last[:300]}")


class RemoteError(GitRepositoryError):
    """A git server could not be used; `reason` is a one-word condition reason
    (AuthenticationFailed, TLSError, Unreachable, NotFound, Timeout, Rejected, ...), `stdout` what
    git printed there (a push's porcelain report). The message never holds a credential."""

    def __init__(self, message: str, *, reason: str = "Error", stdout: str = "") -> None:
        super().__init__(message)
        self.reason, self.stdout = reason, stdout
