"""Fixtures shared by the porchvariant tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.gitservers.https import HttpsGitServer, https_git_server
from tests.gitservers.ssh import SshGitServer, ssh_git_server


@pytest.fixture(name="server")
def server_fixture() -> Iterator[HttpsGitServer]:
    """A real https git server on loopback (apache2 + git http-backend, TLS, basic auth)."""
    with https_git_server() as server:
        yield server


@pytest.fixture(name="ssh_server")
def ssh_server_fixture() -> Iterator[SshGitServer]:
    """A real ssh git server on loopback (its own sshd, public-key authentication only)."""
    with ssh_git_server() as server:
        yield server
