"""Types of the C record decoder and batch encoder (``_message.c``; the comments there are
the contract)."""

from typing import Any

def decode_records(body: Any, message_ext_type: type[Any], /) -> list[Any] | None: ...
def encode_batch(messages: Any, /) -> bytes | None: ...
