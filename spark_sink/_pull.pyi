"""Types of the C pull codec (``_pull.c``; its head comment is the contract)."""

from typing import Any

def pull_request(prefix: bytes, opaque: int, fixed: bytes, queue_offset: int,
                 max_msg_nums: int, /) -> bytes: ...
def pull_answer(frame: Any, /) -> tuple[int, int, int, int, int, int, int] | None: ...
