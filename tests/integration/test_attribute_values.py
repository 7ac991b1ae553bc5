"""The adapters' keys and expression values go through boto3's TypeSerializer (``clients.key``, ``clients.values``).

These pin the wire form the adapters wrote by hand before: a float rounded
by ``clients.num``, an int as is, a set of strings as SS, bytes as B.
"""

from __future__ import annotations

from decimal import Decimal

from crawlstack.aws import clients


def test_values_name_each_placeholder_and_serialize_as_the_adapters_did() -> None:
    now = 1700000001.3333333
    assert clients.values(now=now, cap=3, zero=0, fp={"f1"}, tok="t", yes=True, blob=b"\x00z") == {
        ":now": {"N": str(clients.num(now))},
        ":cap": {"N": "3"},
        ":zero": {"N": "0"},
        ":fp": {"SS": ["f1"]},
        ":tok": {"S": "t"},
        ":yes": {"BOOL": True},
        ":blob": {"B": b"\x00z"},
    }


def test_a_float_is_sent_exactly_as_num_gives_it() -> None:
    for value in (0.0, 1e-06, 2.5, 1700000000.1234567, 1e16, -3.0000004):
        assert clients.serialize(value) == {"N": str(clients.num(value))}
    assert clients.serialize(Decimal("1.50")) == {"N": "1.50"}


def test_key_serializes_each_part_by_name() -> None:
    assert clients.key(host="example.com", kind="slot") == {"host": {"S": "example.com"}, "kind": {"S": "slot"}}


def test_attribute_reads_one_attribute_unmarshalled() -> None:
    item = {"n": {"N": "7"}, "t": {"S": "x"}, "w": {"SS": ["a", "b"]}, "f": {"N": "2.5"}}
    assert clients.attribute(item, "n") == 7
    assert clients.attribute(item, "t") == "x"
    assert clients.attribute(item, "w") == {"a", "b"}
    assert clients.attribute(item, "f") == 2.5
    assert clients.attribute(item, "missing") is None
    assert clients.attribute(None, "n") is None
