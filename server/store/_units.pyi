"""Types of the C consume-queue walk (``_units.c``; its head comment is the contract)."""

from typing import Any

def scan_units(units: Any, max_msg_nums: int, max_phy: int, in_memory: int,
               bytes_in_memory: int, count_in_memory: int, bytes_in_disk: int,
               count_in_disk: int, /) -> tuple[list[tuple[int, int]], int, int, int] | None: ...
