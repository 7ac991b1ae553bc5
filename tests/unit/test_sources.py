"""A watch's sources: checked against the rules, one line for what is wrong."""

from __future__ import annotations

from typing import Any

import pytest

from crawlstack.rules import RuleSet
from crawlstack.rules.mapping import compile_mapping
from crawlstack.watch.sources import (
    DEFAULT_PRIORITY_MAX,
    DEFAULT_PRIORITY_MIN,
    MAX_PRIORITY,
    Source,
    SourceError,
    default_id,
    source_from,
)

CSS_LI = {"type": "css", "parameters": {"selector": "li"}}
RULES = RuleSet(
    (
        compile_mapping(
            "listing.json",
            {
                "name": "listing",
                "url_patterns": [{"type": "domain", "pattern": "news.example"}],
                "items": {"processors": [CSS_LI]},
                "fields": [
                    {"name": "url", "processors": [{"type": "xpath", "parameters": {"expression": ".//a/@href"}}]},
                    {"name": "guid", "processors": [{"type": "css", "parameters": {"selector": "b"}}]},
                ],
            },
        ),
        compile_mapping(
            "page.json",
            {"name": "page", "url_patterns": [{"type": "domain", "pattern": "news.example"}], "fields": []},
        ),
    )
)


def source(**fields: Any) -> Source:
    return source_from({"url": "http://News.example/latest", "mapping": "listing", **fields}, RULES)


def test_a_source_has_seed_003s_defaults_and_a_stable_id() -> None:
    found = source()
    assert found.url == "http://news.example/latest"  # canonical
    assert (found.identity, found.priority_min, found.priority_max) == (
        "url",
        DEFAULT_PRIORITY_MIN,
        DEFAULT_PRIORITY_MAX,
    )
    assert (found.pagination, found.strategy, found.max_pages) == (None, "tokens", 5)
    assert found.id == default_id(found.url, "listing") == source().id
    assert Source.from_item(found.to_item()) == found


def test_pagination_takes_its_parameter_or_a_default() -> None:
    assert (source(pagination="page").pagination_parameter, source(pagination="cursor").pagination_parameter) == (
        "page",
        "max_id",
    )
    assert source(pagination="cursor", pagination_parameter="before").pagination_parameter == "before"
    assert source(pagination="next").pagination_parameter is None


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"mapping": "nope"}, "no mapping named 'nope'"),
        ({"mapping": "page"}, "'page' has no items"),
        ({"url": "ftp://news.example/x"}, "url: invalid URL"),
        ({"url": ""}, "a source needs a URL"),
        ({"identity": "title"}, "has no field 'title'"),
        ({"priority_min": 0}, "must be above 0"),
        ({"priority_max": MAX_PRIORITY * 2}, "at most 1440"),
        ({"priority_min": 2, "priority_max": 1}, "priority_min 2 is above priority_max 1"),
        ({"priority_max": float("nan")}, "must be a number"),
        ({"priority_max": True}, "must be a number"),
        ({"pagination": "scroll"}, "pagination must be one of next, page, cursor"),
        ({"pagination": "next", "pagination_parameter": "p"}, "takes no parameter"),
        ({"pagination_parameter": "p"}, "needs pagination"),
        ({"pagination": "page", "pagination_parameter": "a b"}, "query parameter name"),
        ({"max_pages": 0}, "from 1 to 100"),
        ({"strategy": "random"}, "strategy must be one of tokens, velocity"),
        ({"id": "has space"}, "id must be"),
        ({"colour": "red"}, "unknown key 'colour'"),
    ],
)
def test_a_bad_source_is_one_line(fields: dict[str, Any], problem: str) -> None:
    with pytest.raises(SourceError) as raised:
        source(**fields)
    assert problem in str(raised.value) and "\n" not in str(raised.value)
