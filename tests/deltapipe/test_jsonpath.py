"""deltapipe.jsonpath: the ojg JSONPath dialect, first-match reads and in-place writes (spec §3)."""

from __future__ import annotations

import contextlib
import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deltapipe.errors import PathError
from deltapipe.jsonpath import MAX_LIST_GROWTH, JSONPath, compile_path


def get(path: str, doc: Any) -> Any:
    return compile_path(path).get(doc)


def written(path: str, doc: Any, value: Any = "v") -> Any:
    """doc after setting value at path (doc is changed in place and returned)."""
    compile_path(path).set(doc, value)
    return doc


SERVICE = {
    "apiVersion": "v1",
    "kind": "Service",
    "metadata": {
        "name": "web",
        "namespace": "prod",
        "labels": {"app": "web", "kubernetes.io/service-name": "web-svc", "a.b": 1},
    },
    "spec": {
        "ports": [
            {"name": "http", "port": 80, "weight": 0.5, "tags": ["x", "y"]},
            {"name": "https", "port": 443, "weight": 1.5, "tls": True},
            {"name": "admin", "port": 8080, "weight": 2, "tls": False, "note": None},
        ],
        "selector": {"app": "web", "tier": "front"},
    },
}


# --- reading: names, brackets, indexes, slices, unions, wildcards ---------------------------------


def test_dotted_names_read_nested_values() -> None:
    assert get("$.metadata.name", SERVICE) == "web"
    assert get("$.spec.selector.tier", SERVICE) == "front"


def test_the_bare_root_and_root_dot_read_the_whole_document() -> None:
    assert get("$", SERVICE) is SERVICE
    assert get("$.", SERVICE) is SERVICE


def test_names_may_hold_dashes_underscores_digits_and_other_plain_characters() -> None:
    doc = {"my-key_2": {"0": "zero", "ünï:cøde#%": 1}}
    assert get("$.my-key_2.0", doc) == "zero"
    assert get("$.my-key_2.ünï:cøde#%", doc) == 1


def test_bracket_names_with_either_quote_reach_keys_with_dots_and_slashes() -> None:
    assert get('$["metadata"]["labels"]["kubernetes.io/service-name"]', SERVICE) == "web-svc"
    assert get("$['metadata']['labels']['a.b']", SERVICE) == 1
    assert get("$.metadata.labels[ 'app' ]", SERVICE) == "web"


def test_a_backslash_escapes_the_quote_inside_a_bracket_name() -> None:
    doc = {"it's": 1, 'say "hi"': 2, "back\\slash": 3, "raw\\n": 4}
    assert get(r"$['it\'s']", doc) == 1
    assert get(r'$["say \"hi\""]', doc) == 2
    assert get(r"$['back\\slash']", doc) == 3
    assert get(r"$['raw\n']", doc) == 4  # any other backslash is kept as written


def test_indexes_count_from_the_start_and_negative_ones_from_the_end() -> None:
    assert get("$.spec.ports[0].name", SERVICE) == "http"
    assert get("$.spec.ports[-1].name", SERVICE) == "admin"
    assert get("$.spec.ports[-3].name", SERVICE) == "http"


def test_slices_give_their_first_element() -> None:
    assert get("$.spec.ports[1:].name", SERVICE) == "https"
    assert get("$.spec.ports[:2].name", SERVICE) == "http"
    assert get("$.spec.ports[-1:].name", SERVICE) == "admin"
    assert get("$.spec.ports[::2][1].name", SERVICE) is None  # a slice is not a list value
    assert get("$.spec.ports[::-1].name", SERVICE) == "admin"
    assert get("$.spec.ports[1:3:1].port", SERVICE) == 443


def test_slices_exclude_their_end_and_select_nothing_when_empty_or_with_step_zero() -> None:
    doc = {"l": [10, 20, 30]}
    assert get("$.l[1:2]", doc) == 20
    assert get("$.l[2:2]", doc) is None
    assert get("$.l[5:]", doc) is None
    assert get("$.l[::0]", doc) is None


def test_unions_give_their_first_member_that_exists_in_the_order_written() -> None:
    doc = {"l": [10, 20, 30], "m": {"a": 1, "b": 2}}
    assert get("$.l[2,0]", doc) == 30
    assert get("$.l[7,-2]", doc) == 20
    assert get("$.m['b','a']", doc) == 2
    assert get("$.m['x', \"a\"]", doc) == 1


def test_wildcards_give_the_first_list_element_or_the_value_of_the_smallest_key() -> None:
    assert get("$.spec.ports[*].name", SERVICE) == "http"
    assert get("$.spec.ports.*.port", SERVICE) == 80
    assert get("$.spec.selector.*", SERVICE) == "web"
    assert get("$.*", {"b": 2, "a": 1}) == 1  # key order, not insertion order


def test_wildcards_skip_elements_where_the_rest_of_the_path_does_not_match() -> None:
    assert get("$.spec.ports[*].tls", SERVICE) is True
    assert get("$.spec.ports[*].note", SERVICE) is None
    assert get("$.l[*].x", {"l": [1, "s", {"x": 3}]}) == 3


def test_descent_searches_depth_first_in_document_order_starting_at_the_node_itself() -> None:
    doc = {"name": "root", "a": {"name": "a", "b": {"name": "b"}}}
    assert get("$..name", doc) == "root"
    assert get("$.a..name", doc) == "a"
    assert get("$..b.name", doc) == "b"
    nested = {"z": {"x": 1}, "a": [{"k": {"x": 2}}, {"x": 3}]}
    assert get("$..x", nested) == 2  # a before z; inside a, the first element's subtree first
    assert get("$..[0]", {"m": {"l": [["deep"], "second"]}}) == ["deep"]
    assert get("$..[1]", {"m": {"l": [["deep"], "second"]}}) == "second"
    assert get("$..*", {"b": 2, "a": 1}) == 1
    assert get("$..['x']", nested) == 2


# --- reading: nothing matches ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        "$.missing",
        "$.metadata.missing.deeper",
        "$.spec.ports[3]",
        "$.spec.ports[-4]",
        "$.metadata.name.first",  # through a string
        "$.metadata.name[0]",  # never indexes into a string
        "$.spec.ports.name",  # a name on a list
        "$.metadata[0]",  # an index on a map
        "$.spec.ports[0].port.x",  # through a number
        "$.spec.ports[2].note.x",  # through a null
        "$.nothing[*]",
        "$..nothing",
        "$.spec.ports[?(@.port == 1)]",
    ],
)
def test_a_path_that_matches_nothing_reads_as_none(path: str) -> None:
    assert get(path, SERVICE) is None


@pytest.mark.parametrize("doc", [None, 3, 2.5, True, "text", [], {}])
def test_reading_a_scalar_or_empty_document_never_raises(doc: Any) -> None:
    for path in ("$.a", "$.a[0]", "$[0]", "$..a", "$[*]", "$[?(@.a)]", "$[1:]"):
        assert get(path, doc) is None
    assert get("$", doc) == doc


# --- reading: filters ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("$.spec.ports[?(@.name == 'https')].port", 443),
        ('$.spec.ports[?(@.name == "admin")].port', 8080),
        ("$.spec.ports[?(@.name != 'http')].port", 443),
        ("$.spec.ports[?(@.port < 443)].name", "http"),
        ("$.spec.ports[?(@.port <= 443)].name", "http"),
        ("$.spec.ports[?(@.port > 443)].name", "admin"),
        ("$.spec.ports[?(@.port >= 443)].name", "https"),
        ("$.spec.ports[?(@.weight > 1)].name", "https"),  # float against int
        ("$.spec.ports[?(@.weight == 2.0)].name", "admin"),  # numbers compare by value
        ("$.spec.ports[?(@.weight < 1e0)].name", "http"),
        ("$.spec.ports[?(@.port > -1)].name", "http"),
        ("$.spec.ports[?(@.name > 'b')].name", "http"),  # strings compare lexicographically
        ("$.spec.ports[?(@.name in ['admin', 'https'])].port", 443),
        ("$.spec.ports[?(@.port in [8080])].name", "admin"),
        ("$.spec.ports[?(@.name =~ /^ad/)].port", 8080),
        ("$.spec.ports[?(@.name =~ 's$')].port", 443),
        ("$.spec.ports[?(@.tls == true)].name", "https"),
        ("$.spec.ports[?(@.tls == false)].name", "admin"),
        ("$.spec.ports[?(@.note == null)].name", "http"),  # missing compares as null
        ("$.spec.ports[?(@.tags[1] == 'y')].name", "http"),
        ("$.spec.ports[?(@['name'] == 'admin')].port", 8080),
        ("$.spec.ports[?(@.name == $.spec.ports[2].name)].port", 8080),
        ("$.spec.ports[?@.port == 443].name", "https"),  # the parentheses are optional
    ],
)
def test_filters_compare_each_element_and_give_the_first_that_holds(path: str, expected: Any) -> None:
    assert get(path, SERVICE) == expected


def test_filters_combine_with_and_or_not_and_parentheses() -> None:
    ports = "$.spec.ports"
    assert get(ports + "[?(@.port > 80 && @.tls == false)].name", SERVICE) == "admin"
    assert get(ports + "[?(@.port == 8080 || @.port == 443)].name", SERVICE) == "https"
    assert get(ports + "[?(!(@.name == 'http'))].name", SERVICE) == "https"
    assert get(ports + "[?(@.port == 1 || @.port > 80 && @.tls == false)].name", SERVICE) == "admin"
    assert get(ports + "[?((@.port == 80 || @.port == 443) && @.tls)].name", SERVICE) == "https"
    assert get(ports + "[?(!@.tls && @.port > 80)].name", SERVICE) is None  # admin has tls: false


def test_a_bare_path_in_a_filter_tests_existence_even_of_null_or_false() -> None:
    assert get("$.spec.ports[?(@.tls)].name", SERVICE) == "https"
    assert get("$.spec.ports[?(@.note)].name", SERVICE) == "admin"
    assert get("$.spec.ports[?(!@.tls)].name", SERVICE) == "http"
    assert get("$.spec.ports[?(@.missing)]", SERVICE) is None


def test_comparisons_between_different_kinds_are_false() -> None:
    doc = {"l": [{"v": "1"}, {"v": True}, {"v": 1}, {"v": None}]}
    assert get("$.l[?(@.v < 2)].v", doc) == 1
    assert get("$.l[?(@.v == 1)].v", doc) == 1  # neither "1" nor true equals 1
    assert get("$.l[?(@.v >= 'a')]", doc) is None
    assert get("$.l[?(@.v < null)]", doc) is None
    assert get("$.l[?(@.v =~ /1/)].v", doc) == "1"  # only strings match a regex
    assert get("$.l[?(@.v in 'abc')]", doc) is None  # `in` needs a list


def test_a_filter_on_a_map_tests_its_values_in_key_order() -> None:
    doc = {"m": {"b": {"n": 2}, "a": {"n": 1}, "c": {"n": 3}}}
    assert get("$.m[?(@.n > 1)].n", doc) == 2
    assert get("$.m[?(@.n > 0)].n", doc) == 1


def test_a_filter_compares_the_element_itself_with_a_bare_at() -> None:
    assert get("$.l[?(@ > 2)]", {"l": [1, 2, 3, 4]}) == 3
    assert get("$.l[?(@ =~ /b/)]", {"l": ["abc", 5]}) == "abc"


def test_filters_apply_after_descent() -> None:
    doc = {"a": {"items": [{"id": 1}]}, "b": [{"id": 2, "ok": True}]}
    assert get("$..[?(@.ok == true)].id", doc) == 2


# --- steps, caching and errors -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "steps"),
    [
        ("$", ()),
        ("$.", ()),
        ("$.metadata.labels.app", ("metadata", "labels", "app")),
        ('$.a["b.c"][0]', ("a", "b.c", 0)),
        ("$['x']['y/z'][12].w", ("x", "y/z", 12, "w")),
        ("$.a.0", ("a", "0")),
    ],
)
def test_a_simple_path_exposes_its_names_and_indexes_as_steps(path: str, steps: tuple[Any, ...]) -> None:
    assert compile_path(path).steps == steps


@pytest.mark.parametrize(
    "path", ["$.a[-1]", "$.a[*]", "$.*", "$..a", "$.a[1:2]", "$.a[0,1]", "$['a','b']", "$.a[?(@.x)]"]
)
def test_any_other_path_has_no_steps(path: str) -> None:
    assert compile_path(path).steps is None


def test_compiling_the_same_text_twice_gives_the_same_object() -> None:
    first = compile_path("$.spec.cached[?(@.a == 1)]")
    assert compile_path("$.spec.cached[?(@.a == 1)]") is first
    assert isinstance(first, JSONPath)
    assert first.text == "$.spec.cached[?(@.a == 1)]"


@pytest.mark.parametrize(
    ("path", "problem"),
    [
        ("$.a[", "unterminated bracket"),
        ("$.a[0", "unterminated bracket"),
        ("$.a['b'", "unterminated bracket"),
        ("$.a['b]", "unterminated string"),
        ("$.a.", "missing name after '.'"),
        ("$..", "missing name after '..'"),
        ("$...a", "unexpected '.'"),
        ("$$", "unexpected '$'"),
        ("$$.a", "unexpected '$'"),
        ("a.b", "must start with '$'"),
        ("", "must start with '$'"),
        ("$.a.length()", "function calls are not supported"),
        ("$.a b", "unexpected ' '"),
        ("$.a]", "unexpected ']'"),
        ("$[a]", "unexpected 'a'"),
        ("$[-]", "expected a number"),
        ("$[1:2:3:4]", "unexpected ':'"),
        ("$[0,]", "unexpected ']'"),
        ("$[99999999999999999999]", "expected a number"),
        ("$[?(@.a = 1)]", "unexpected '='"),
        ("$[?(@.a == )]", "expected a value"),
        ("$[?(@.a == 1]", "unexpected ']'"),
        ("$[?(@.a == 1", "unterminated parenthesis"),
        ("$[?(@.a =~ /x)]", "unterminated regex"),
        ("$[?(@.a =~ /(/)]", "invalid regex"),
        ("$[?(@.a =~ 5)]", "=~ needs a /regex/"),
        ("$[?(@.a == /x/)]", "can only follow =~"),
        ("$[?(@.a in [@.b])]", "only strings, numbers"),
        ("$[?(@.a in ['x' 'y'])]", 'unexpected "\'"'),
        ("$[?(@.a == truex)]", "expected a value"),
        ("$[?(" + "(" * 100 + "@.a" + ")" * 100 + ")]", "nested too deeply"),
    ],
)
def test_a_malformed_path_is_a_path_error_naming_the_text_and_the_problem(path: str, problem: str) -> None:
    with pytest.raises(PathError) as caught:
        compile_path(path)
    message = str(caught.value)
    assert message.startswith(f'invalid JSONPath "{path}": ')
    assert problem in message


def test_the_unterminated_bracket_message_reads_as_documented() -> None:
    with pytest.raises(PathError, match=r'^invalid JSONPath "\$\.a\[": unterminated bracket$'):
        compile_path("$.a[")


# --- writing -----------------------------------------------------------------------------------


def test_setting_creates_the_missing_maps_on_the_way() -> None:
    assert written("$.a.b.c", {}) == {"a": {"b": {"c": "v"}}}
    assert written("$.a.x", {"a": {"keep": 1}}) == {"a": {"keep": 1, "x": "v"}}
    assert written("$['k.8s/name'].x", {}) == {"k.8s/name": {"x": "v"}}


def test_setting_an_index_creates_or_pads_the_list_with_nulls() -> None:
    assert written("$.y[3]", {}, 12) == {"y": [None, None, None, 12]}
    assert written("$.y[1]", {"y": [0, 1, 2]}) == {"y": [0, "v", 2]}
    assert written("$.y[4]", {"y": [0]}) == {"y": [0, None, None, None, "v"]}
    assert written("$[2]", []) == [None, None, "v"]


def test_an_intermediate_index_creates_a_map_before_a_name_and_a_list_before_an_index() -> None:
    assert written("$.y[1].a", {}) == {"y": [None, {"a": "v"}]}
    assert written("$.y[0][2]", {}) == {"y": [[None, None, "v"]]}
    assert written("$.y[1].b", {"y": [None, {"a": 1}]}) == {"y": [None, {"a": 1, "b": "v"}]}


def test_a_null_on_the_way_is_replaced_like_a_missing_value() -> None:
    assert written("$.a.b", {"a": None}) == {"a": {"b": "v"}}
    assert written("$.l[0].b", {"l": [None]}) == {"l": [{"b": "v"}]}


def test_the_value_is_stored_itself_not_a_copy() -> None:
    value = {"shared": True}
    doc: dict[str, Any] = {}
    compile_path("$.a.b").set(doc, value)
    assert doc["a"]["b"] is value


def test_a_wildcard_writes_every_existing_element_and_key() -> None:
    assert written("$.l[*].x", {"l": [{}, {"x": 1}, 3]}) == {"l": [{"x": "v"}, {"x": "v"}, 3]}
    assert written("$.l[*]", {"l": [1, 2]}) == {"l": ["v", "v"]}
    assert written("$.m.*", {"m": {"a": 1, "b": 2}}) == {"m": {"a": "v", "b": "v"}}
    assert written("$.l[*].x", {"l": []}) == {"l": []}


def test_a_union_writes_existing_indexes_and_the_named_keys() -> None:
    assert written("$.l[0,2,9]", {"l": [1, 2, 3]}) == {"l": ["v", 2, "v"]}
    assert written("$.m['a','b']", {"m": {"a": 1}}) == {"m": {"a": "v", "b": "v"}}
    assert written("$.l[0,1].x", {"l": [{}, 5]}) == {"l": [{"x": "v"}, 5]}


def test_a_negative_index_overwrites_an_existing_element() -> None:
    assert written("$.l[-1]", {"l": [1, 2, 3]}) == {"l": [1, 2, "v"]}
    assert written("$.l[-2].x", {"l": [{}, {}]}) == {"l": [{"x": "v"}, {}]}


def test_a_filter_on_the_way_writes_into_every_matching_element() -> None:
    doc = written("$.l[?(@.n == 'a')].hit", {"l": [{"n": "a"}, {"n": "b"}, {"n": "a"}]})
    assert doc == {"l": [{"n": "a", "hit": "v"}, {"n": "b"}, {"n": "a", "hit": "v"}]}


def test_descent_on_the_way_writes_into_every_map() -> None:
    assert written("$..x", {"a": {"b": {}}, "l": [{}]}) == {
        "a": {"b": {"x": "v"}, "x": "v"},
        "l": [{"x": "v"}],
        "x": "v",
    }


@pytest.mark.parametrize(
    ("path", "doc", "problem"),
    [
        ("$", {}, "the root itself"),
        ("$.", {}, "the root itself"),
        ("$.a[1:2]", {"a": [1, 2]}, "ending in a slice"),
        ("$.a[?(@.x)]", {"a": [{"x": 1}]}, "ending in a filter"),
        ("$.a[*].x", {}, "cannot deduce what to create at $.a for [*]"),
        ("$.a['p','q'].x", {}, "cannot deduce what to create at $.a"),
        ("$.a[?(@.x)].y", {}, "cannot deduce what to create at $.a"),
        ("$.a[-1]", {}, "cannot deduce the length of a new list at $.a for [-1]"),
        ("$.a[-1]", {"a": []}, "cannot deduce where [-1] is in the 0-element list at $.a"),
        ("$.a[-3].b", {"a": [{}]}, "cannot deduce where [-3]"),
        ("$.a.b", {"a": "s"}, "cannot write through the string at $.a"),
        ("$.a[0].b", {"a": [7]}, "cannot write through the number at $.a[0]"),
        ("$[0]", {}, "$ is a map, not a list"),
        ("$.a", [], "$ is a list, not a map"),
        ("$.a[0]", {"a": {}}, "$.a is a map, not a list"),
        ("$.a.b", {"a": []}, "$.a is a list, not a map"),
        ("$.a", "text", "the document is a string, not a map or list"),
        ("$.a", None, "the document is a null, not a map or list"),
        (f"$.a[{MAX_LIST_GROWTH}]", {}, "too many nulls"),
    ],
)
def test_a_write_that_cannot_be_done_is_a_path_error_naming_the_path(path: str, doc: Any, problem: str) -> None:
    with pytest.raises(PathError) as caught:
        compile_path(path).set(doc, "v")
    message = str(caught.value)
    assert message.startswith(f'cannot set "{path}": ')
    assert problem in message


def test_list_growth_up_to_the_limit_is_allowed() -> None:
    doc = written(f"$.a[{MAX_LIST_GROWTH - 1}]", {})
    assert len(doc["a"]) == MAX_LIST_GROWTH


def test_after_a_wildcard_mismatched_or_scalar_positions_are_skipped() -> None:
    assert written("$.*.x", {"m": {}, "l": [], "s": "str"}) == {"m": {"x": "v"}, "l": [], "s": "str"}
    assert written("$.*[0]", {"m": {}, "l": []}) == {"m": {}, "l": ["v"]}


# --- never any other exception ---------------------------------------------------------------------

PATH_ALPHABET = "$.[]*?@'\"=<>!&|0123456789abcdefghijklmnopqrstuvwxyz-,:()/~ "
FRAGMENTS = [".a", ".x", "[0]", "[3]", "[-1]", "[*]", ".*", "..", "..a", "[1:]", "[::-1]", "['a','x']"]
FRAGMENTS += ["[0,-1]", "[?(@.a)]", "[?(@.a == 1)]", "[?(@ > 0 || @ =~ /a/)]", "[?(!@.x && @.a in [1, 'a'])]"]
PATH_TEXT = st.one_of(
    st.text(alphabet=PATH_ALPHABET, max_size=30).map(lambda tail: "$" + tail),
    st.text(alphabet=PATH_ALPHABET, max_size=30),
    st.lists(st.sampled_from(FRAGMENTS), max_size=5).map(lambda frags: "$" + "".join(frags)),
)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(alphabet="ab01", max_size=3),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from("ab0xyz"), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=1500, deadline=None)
@given(text=PATH_TEXT, doc=JSON, value=JSON)
def test_any_path_and_document_raise_nothing_but_path_error(text: str, doc: Any, value: Any) -> None:
    try:
        path = compile_path(text)
    except PathError:
        return
    before = copy.deepcopy(doc)
    path.get(doc)
    assert doc == before  # reading changes nothing
    with contextlib.suppress(PathError):
        path.set(doc, value)
