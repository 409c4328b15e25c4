"""Types of the C record decoder (``_records.c``; its head comment is the contract)."""

_Strings = tuple[bytes, bytes]  # int32 offsets (n + 1), data
_Nullable = tuple[bytes | None, int, bytes, bytes]  # validity bitmap, null count, offsets, data
_Fixed = tuple[bytes, bytes, bytes, bytes, bytes]  # queueId, queueOffset, born, store, reconsume
_Properties = tuple[bytes, bytes, bytes, bytes, bytes]  # entries, key offsets/data, value offsets/data

def scan(windows: list[tuple[bytes | bytearray | memoryview, int]], with_properties: bool, /) -> tuple[
    int, _Fixed, _Strings, _Strings, _Nullable, _Nullable, _Strings, _Strings,
    _Properties | None] | None: ...
