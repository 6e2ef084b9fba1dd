"""Which git servers a credential Secret may be sent to (the annotation porchkit.dev/git-servers): pure."""

from __future__ import annotations

import pytest

from porchvariant.embedded._secret_scope import SERVERS_ANNOTATION, secret_problem


def secret(servers: str | None) -> dict[str, object]:
    annotations = {SERVERS_ANNOTATION: servers} if servers is not None else {}
    return {"metadata": {"name": "git-edge", "namespace": "team-a", "annotations": annotations}}


@pytest.mark.parametrize(("servers", "url"), [
    ("https://git.example.com/platform", "https://git.example.com/platform/edge.git"),
    ("https://git.example.com/platform/", "https://git.example.com/platform/edge.git"),
    ("https://git.example.com", "https://git.example.com/anything/at/all.git"),
    ("https://GIT.example.com:443/", "https://git.example.com/x.git"),  # host case and the default port
    ("https://git.example.com/platform/edge.git", "https://git.example.com/platform/edge.git"),
    ("https://other.example.com/, https://git.example.com/platform/", "https://git.example.com/platform/edge.git"),
    ("https://other.example.com/\n  https://git.example.com/", "https://git.example.com/edge.git"),
    ("ssh://git.example.com/", "git@git.example.com:team/x.git"),  # scp-like is ssh on port 22
    ("ssh://git@git.example.com:2222/a", "ssh://git@git.example.com:2222/a/b.git"),
    ("git+ssh://git.example.com/", "ssh://bob@git.example.com/x.git"),
    ("https://git.example.com/team%20a/", "https://git.example.com/team a/x.git"),
])
def test_a_url_the_annotation_covers_may_have_the_secret(servers: str, url: str) -> None:
    assert secret_problem(secret(servers), url) is None


@pytest.mark.parametrize(("servers", "url"), [
    ("https://git.example.com/platform", "https://git.example.com/platform-old/edge.git"),  # a sibling, not a folder
    ("https://git.example.com", "https://git.example.com.evil.io/x.git"),
    ("https://git.example.com", "http://git.example.com/x.git"),  # another scheme
    ("https://git.example.com", "https://git.example.com:8443/x.git"),  # another port
    ("https://git.example.com/platform/", "https://git.example.com/platform/../x/edge.git"),
    ("https://git.example.com/platform/", "https://git.example.com/platform/%2e%2e/x/edge.git"),
    ("ssh://git@git.example.com/", "ssh://mallory@git.example.com/x.git"),  # another user
    ("ssh://git.example.com:2222/", "git@git.example.com:x.git"),
    ("not a url", "https://git.example.com/x.git"),
])
def test_a_url_the_annotation_does_not_cover_is_refused_naming_what_it_names(servers: str, url: str) -> None:
    problem = secret_problem(secret(servers), url)
    assert problem == f"Secret team-a/git-edge may not be sent to {url!r}: {SERVERS_ANNOTATION} names " + \
        ", ".join(servers.replace(",", " ").split())


@pytest.mark.parametrize("servers", [None, "", " , "])
def test_a_secret_without_the_annotation_says_what_to_add(servers: str | None) -> None:
    assert secret_problem(secret(servers), "https://git.example.com:8443/platform/edge.git") == (
        f"Secret team-a/git-edge does not name the git servers it may be sent to: add the annotation "
        f"{SERVERS_ANNOTATION} with 'https://git.example.com:8443/' (or a URL prefix covering "
        f"'https://git.example.com:8443/platform/edge.git')")
