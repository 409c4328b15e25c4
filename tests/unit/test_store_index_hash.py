"""Index key hashing: new files use CRC-32 (marked in entry 0), unmarked files keep Java's hash."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from aiorocketmq.server.store.index import (
    CRC32_MAGIC,
    INDEX_HEADER_SIZE,
    IndexService,
    crc32_key_hash,
    index_key_hash,
)


def _entry0(svc: IndexService) -> int:
    f = svc.files[-1]
    return int.from_bytes(f.mf.mm[INDEX_HEADER_SIZE + svc.hash_slot_num * 4:][:4], "big")


def test_new_file_is_marked_and_reloads_with_crc32(tmp_path) -> None:
    idx = IndexService(str(tmp_path), hash_slot_num=8, index_num=16)
    idx.ensure_capacity(2)
    idx.build_index("T", "k1 k2", "U1", 100, 1_000_000)
    assert _entry0(idx) == CRC32_MAGIC
    assert idx.files[-1].key_hash is crc32_key_hash
    idx.files[-1].flush()
    idx.close()
    again = IndexService(str(tmp_path), hash_slot_num=8, index_num=16)
    again.load()
    assert again.files[-1].key_hash is crc32_key_hash
    for key in ("k1", "k2", "U1"):
        assert again.query("T", key, 8, 0, 2**62).phy_offsets == [100]
    again.close()


def test_unmarked_file_is_read_with_the_java_hash(tmp_path) -> None:
    idx = IndexService(str(tmp_path), hash_slot_num=8, index_num=16)
    idx.ensure_capacity(3)
    f = idx.files[-1]
    # A file as written before the marker existed: entry 0 blank, keys hashed like Java.
    f.mf.mm[INDEX_HEADER_SIZE + 8 * 4:INDEX_HEADER_SIZE + 8 * 4 + 20] = bytes(20)
    f.key_hash = index_key_hash
    idx.build_index("T", "old-key", "U-old", 200, 2_000_000)
    idx.close()
    again = IndexService(str(tmp_path), hash_slot_num=8, index_num=16)
    again.load()
    assert again.files[-1].key_hash is index_key_hash
    assert again.query("T", "old-key", 8, 0, 2**62).phy_offsets == [200]
    assert again.query("T", "U-old", 8, 0, 2**62).phy_offsets == [200]
    # A later roll starts a marked file; queries walk both kinds.
    again.files[-1].index_count = again.files[-1].index_num
    again.ensure_capacity(1)
    again.build_index("T", "old-key", None, 300, 2_001_000)
    assert again.files[-1].key_hash is crc32_key_hash
    assert sorted(again.query("T", "old-key", 8, 0, 2**62).phy_offsets) == [200, 300]
    again.close()


@settings(max_examples=200)
@given(st.text(max_size=64))
def test_crc32_key_hash_fits_a_non_negative_int32(key: str) -> None:
    h = crc32_key_hash(key)
    assert 0 <= h <= 0x7FFFFFFF
    assert h == crc32_key_hash(key)
