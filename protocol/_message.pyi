"""Types of the C record decoder (``_message.c``; its head comment is the contract)."""

from typing import Any

def decode_records(body: Any, message_ext_type: type[Any], /) -> list[Any] | None: ...
