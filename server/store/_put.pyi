"""Types of the C put path (``_put.c``; its head comment is the contract)."""

from typing import Any

def write_record(buf: Any, pos: int, topic_b: bytes, queue_id: int, flag: int,
                 queue_offset: int, physical_offset: int, sys_flag: int, born_timestamp: int,
                 born_host: bytes, store_timestamp: int, store_host: bytes,
                 reconsume_times: int, prepared_transaction_offset: int, body: Any,
                 props_b: bytes, /) -> tuple[int, str]: ...
def write_batch(buf: Any, pos: int, topic_b: bytes, queue_id: int, queue_offset: int,
                counted: bool, physical_offset: int, sys_flag: int, born_timestamp: int,
                born_host: bytes, store_timestamp: int, store_host: bytes,
                reconsume_times: int, prepared_transaction_offset: int,
                members: list[tuple[int, bytes, bytes]], /) -> tuple[list[str], list[int]]: ...
def index_put(buf: Any, hash_slot_num: int, entries_base: int, count: int, key: str,
              phy_offset: int, store_timestamp: int, begin_timestamp: int,
              begin_phy_offset: int, hash_slot_count: int, /) -> int: ...
def index_put_many(buf: Any, hash_slot_num: int, entries_base: int, count: int, prefix: bytes,
                   keys: list[str], phy_offsets: list[int], store_timestamp: int,
                   begin_timestamp: int, begin_phy_offset: int, hash_slot_count: int, /
                   ) -> int: ...
def cq_units(buf: Any, pos: int, offsets: list[int], end: int, tags_codes: list[int], /
             ) -> None: ...
def send_properties(raw: str, cluster: str, suffix: str, /
                    ) -> tuple[dict[str, str], str, str | None] | None: ...
def batch_members(body: Any, batch_props: dict[str, str], batch_str: str, /
                  ) -> list[tuple[int, bytes, dict[str, str], str]] | None: ...
