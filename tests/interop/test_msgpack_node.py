"""msgpack bodies across languages: ``Message.of(obj)`` bodies decoded by npm's
``@msgpack/msgpack`` (3.1.3, tests/interop/package.json), and bodies it encodes decoded by
``Message.decode()`` through their ``contentType`` property.

The node side is ``harness/msgpack_codec.js``; a missing node or package fails the test
(never skips it), like the ali-ons suite.
"""

from __future__ import annotations

import json
import subprocess
from datetime import UTC, datetime
from typing import Any

import pytest

from aiorocketmq.protocol.body_codec import CONTENT_TYPE_PROPERTY, MSGPACK
from aiorocketmq.protocol.message import Message
from tests.interop.node import HARNESS_DIR, HERE, require_node

pytestmark = [pytest.mark.interop, pytest.mark.timeout(60)]

PACKAGE = HERE / "node_modules" / "@msgpack" / "msgpack" / "package.json"

WHEN = datetime(2024, 5, 6, 7, 8, 9, 123000, tzinfo=UTC)  # JS Dates hold milliseconds
OBJECTS: list[Any] = [
    {"id": 42, "name": "order-42 ✓", "amount": 12.5, "paid": True, "note": None},
    {"items": [{"sku": "a", "qty": 1}, {"sku": "b", "qty": -3}], "tags": ["x", "y"],
     "big": 2**40, "neg": -(2**31), "nested": {"deep": {"er": [[], {}]}}},
    {"raw": b"\x00\x01\xfe\xff", "at": WHEN},
    [1, "two", 3.0, None, False],
]


def to_tagged(value: Any) -> Any:
    """Python value -> the JSON form the node script speaks ($bin, $date)."""
    if isinstance(value, bytes):
        return {"$bin": value.hex()}
    if isinstance(value, datetime):
        return {"$date": value.isoformat(timespec="milliseconds").replace("+00:00", "Z")}
    if isinstance(value, list):
        return [to_tagged(v) for v in value]
    if isinstance(value, dict):
        return {k: to_tagged(v) for k, v in value.items()}
    return value


def run_node(config: dict[str, Any]) -> dict[str, Any]:
    node = require_node()
    if not PACKAGE.is_file():
        pytest.fail(f"{PACKAGE.relative_to(HERE.parents[1])} is missing: run `make interop-deps` "
                    "(it installs @msgpack/msgpack from tests/interop/package.json)",
                    pytrace=False)
    proc = subprocess.run([node, str(HARNESS_DIR / "msgpack_codec.js"), json.dumps(config)],
                          cwd=HERE, capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    result: dict[str, Any] = json.loads(proc.stdout)
    return result


def test_node_decodes_what_message_of_encodes() -> None:
    messages = [Message.of(obj, topic="InteropMsgpack") for obj in OBJECTS]
    assert all(m.properties[CONTENT_TYPE_PROPERTY] == MSGPACK for m in messages)
    decoded = run_node({"decode": [m.body.hex() for m in messages]})["decoded"]
    assert decoded == [to_tagged(obj) for obj in OBJECTS]


def test_message_decode_reads_what_node_encodes() -> None:
    encoded = run_node({"encode": [to_tagged(obj) for obj in OBJECTS]})["encoded"]
    for obj, hex_body in zip(OBJECTS, encoded, strict=True):
        msg = Message("InteropMsgpack", bytes.fromhex(hex_body),
                      properties={CONTENT_TYPE_PROPERTY: MSGPACK})
        got = msg.decode()
        # @msgpack/msgpack writes 3.0 as the integer 3 (JS has one number type).
        if isinstance(obj, list):
            obj = [3 if v == 3.0 and isinstance(v, float) else v for v in obj]
        assert got == obj
