"""mqdashboard beyond loopback: without ``[users]`` every visitor is an anonymous admin.

``mqdashboard --host 0.0.0.0`` with no users used to serve that admin session to anyone
who could reach the port, without a word. It is refused now (one line, exit 2) unless the
operator passes ``--allow-anonymous-remote``, and then it says so in a warning.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from aiorocketmq.client.dashboard.auth import hash_password
from tests.procs import ServerProcess

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

READY = re.compile(r"mqdashboard listening on http://(?P<addr>\S+)")
NAMESRV = "127.0.0.1:9876"  # never dialled before a page asks for something


def dashboard(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "aiorocketmq.client.dashboard.main", *args],
                          capture_output=True, text=True, timeout=timeout)


def serve(tmp_path: Path, *args: str) -> ServerProcess:
    return ServerProcess([sys.executable, "-m", "aiorocketmq.client.dashboard.main", "-n", NAMESRV,
                          "--port", "0", *args], READY, tmp_path / "dashboard.log").start()


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.0.2.10", "example.org"])
def test_serving_beyond_loopback_without_users_is_refused(host: str) -> None:
    proc = dashboard("-n", NAMESRV, "--host", host, "--port", "0")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith(f"mqdashboard: refusing to serve {host} without [users]"), line
    assert "--allow-anonymous-remote" in line
    assert "listening" not in proc.stdout


def test_the_config_file_host_is_checked_too(tmp_path: Path) -> None:
    conf = tmp_path / "dashboard.toml"
    conf.write_text(f'namesrv_addr = "{NAMESRV}"\nhost = "0.0.0.0"\nport = 0\n')
    proc = dashboard("-c", str(conf))
    assert proc.returncode == 2 and "refusing to serve 0.0.0.0" in proc.stderr, proc.stderr
    conf.write_text(conf.read_text() + 'allow_anonymous_remote = "yes"\n')
    proc = dashboard("-c", str(conf))
    assert proc.returncode == 2 and "must be true or false" in proc.stderr, proc.stderr


def test_opting_in_serves_and_warns(tmp_path: Path) -> None:
    server = serve(tmp_path, "--host", "0.0.0.0", "--allow-anonymous-remote")
    try:
        assert server.address.startswith("0.0.0.0:")
    finally:
        assert server.stop() == 0
    log = server.log_path.read_text()
    assert "dashboard.anonymous_remote_admin" in log and "warning" in log, log


def test_loopback_and_logins_need_no_opt_in(tmp_path: Path) -> None:
    local = serve(tmp_path / "local", "--host", "127.0.0.1")
    try:
        assert local.address.startswith("127.0.0.1:")
    finally:
        local.stop()
    assert "anonymous_remote_admin" not in local.log_path.read_text()
    conf = tmp_path / "users.toml"
    conf.write_text(f'[users.alice]\npassword_hash = "{hash_password("s3cret-pw")}"\n')
    remote = serve(tmp_path / "remote", "--host", "0.0.0.0", "-c", str(conf))
    try:
        assert remote.address.startswith("0.0.0.0:")
    finally:
        remote.stop()
    assert "anonymous_remote_admin" not in remote.log_path.read_text()
