"""Fixtures shared by the porchvariant tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.gitservers.https import HttpsGitServer, https_git_server


@pytest.fixture(name="server")
def server_fixture() -> Iterator[HttpsGitServer]:
    """A real https git server on loopback (apache2 + git http-backend, TLS, basic auth)."""
    with https_git_server() as server:
        yield server
