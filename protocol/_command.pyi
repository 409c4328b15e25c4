"""Types of the C ROCKETMQ header codec (``_command.c``; its head comment is the contract)."""

from typing import Any, TypeVar

_C = TypeVar("_C")

def decode_rocketmq_header(header: Any, command_type: type[_C], serialize_type: int, /) -> _C | None: ...
def encode_rocketmq_header(command: Any, /) -> bytes | None: ...
