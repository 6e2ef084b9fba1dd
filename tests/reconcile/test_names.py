"""reconcile.names: object names under each kind's rule, in the API server's words."""

from __future__ import annotations

import pytest

from reconcile.names import NameRule, name_problem

SUBDOMAIN = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and "
             "must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
             "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")


@pytest.mark.parametrize(("name", "rule"), [
    ("web", "subdomain"), ("edge.east-1", "subdomain"), ("a" * 253, "subdomain"), ("0", "subdomain"),
    ("team-a", "label"), ("a" * 63, "label"), ("9lives", "label"),
    ("web-1", "dns1035"),
    ("system:controller:Deploy_Me", "segment"),
])
def test_valid_names_have_no_problem(name: str, rule: NameRule) -> None:
    assert name_problem(name, rule) is None


@pytest.mark.parametrize(("name", "rule", "problem"), [
    ("Bad_Name!", "subdomain", SUBDOMAIN),
    ("", "subdomain", SUBDOMAIN),
    ("-edge", "subdomain", SUBDOMAIN),
    ("edge.", "subdomain", SUBDOMAIN),
    ("a" * 254, "subdomain", "must be no more than 253 characters"),
    ("a.b", "label", "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
                     "must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex "
                     "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"),
    ("a" * 64, "label", "must be no more than 63 characters"),
    ("1web", "dns1035", "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with "
                        "an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or "
                        "'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"),
    ("..", "segment", "may not be '..'"),
    ("a/b", "segment", "may not contain '/'"),
    ("100%", "segment", "may not contain '%'"),
])
def test_an_invalid_name_gets_the_servers_words(name: str, rule: NameRule, problem: str) -> None:
    assert name_problem(name, rule) == problem


def test_a_subdomain_is_the_rule_unless_another_is_named() -> None:
    assert name_problem("Bad_Name!") == SUBDOMAIN
    assert name_problem("a" * 10_000) == "must be no more than 253 characters"
