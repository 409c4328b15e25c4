"""write_file_atomic: the new content or the old, and the previous content as .bak on request."""

from __future__ import annotations

from pathlib import Path

from aiorocketmq.client.atomic_file import write_file_atomic


def test_replaces_and_keeps_the_previous_content_only_when_asked(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "t.json"
    write_file_atomic(path, b"one", backup=True)  # creates the directory; nothing to back up
    assert path.read_bytes() == b"one" and not path.with_name("t.json.bak").exists()
    write_file_atomic(path, b"two", backup=True)
    assert path.read_bytes() == b"two" and path.with_name("t.json.bak").read_bytes() == b"one"
    write_file_atomic(path, b"three")
    assert path.read_bytes() == b"three" and path.with_name("t.json.bak").read_bytes() == b"one"
    assert sorted(p.name for p in path.parent.iterdir()) == ["t.json", "t.json.bak"]  # no .tmp
