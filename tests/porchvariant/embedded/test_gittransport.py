"""Which git URLs the embedded Porch talks to, and how often it fetches them: pure, no server."""

from __future__ import annotations

import pytest

from porchvariant.embedded._porch_remotes import fetch_period
from porchvariant.embedded.git.transport import is_remote, url_problem


@pytest.mark.parametrize(("url", "problem"), [
    ("http://git.example.com/r.git", "plain http:// is allowed only to a loopback address"),
    ("https://user:pw@git.example.com/r.git", "must not carry credentials"),
    ("ftp://git.example.com/r.git", "the ftp protocol is not supported"),
])
def test_urls_porchkit_will_not_use_are_refused_with_the_reason(url: str, problem: str) -> None:
    assert problem in (url_problem(url) or "")


def test_loopback_http_and_https_are_allowed() -> None:
    assert url_problem("http://127.0.0.1:8080/r.git") is None
    assert url_problem("http://[::1]/r.git") is None
    assert url_problem("https://git.example.com/org/r.git") is None


def test_local_paths_and_file_urls_are_not_remote() -> None:
    assert not is_remote("/srv/git/r.git") and not is_remote("file:///srv/git/r.git")
    assert is_remote("https://git.example.com/r.git") and is_remote("git@git.example.com:r.git")


@pytest.mark.parametrize(("schedule", "seconds"), [
    ("@every 30s", 30.0), ("@every 2m", 120.0), ("*/5 * * * *", 300.0), ("* * * * *", 60.0),
    ("@hourly", 3600.0), ("0 3 * * 1", 45.0), ("", 45.0),
])
def test_a_plain_interval_in_spec_sync_schedule_sets_the_fetch_period(schedule: str, seconds: float) -> None:
    assert fetch_period({"spec": {"sync": {"schedule": schedule}}}, 45.0) == seconds
