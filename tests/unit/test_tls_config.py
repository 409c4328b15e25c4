"""``tls.config.file`` is read as Java's ``Properties.load`` reads it (upstream's TlsSystemConfig)."""

from __future__ import annotations

from pathlib import Path

import pytest

from aiorocketmq.protocol.tls import TlsConfig, TlsMode


def test_the_file_honours_continuations_escapes_and_separators(tmp_path: Path) -> None:
    conf = tmp_path / "tls.properties"
    conf.write_text(
        "# comment\n"
        "! another comment\n"
        "tls.server.mode : enforcing\n"
        "tls.server.certPath=/etc/rocketmq/\\\n"
        "    server.pem\n"
        "tls.server.keyPath /etc/rocketmq/key\\u002Epem\n"
        "tls.server.keyPassword=pa\\=ss\\:word\n"
        "tls.client.trustCertPath=C\\:\\\\certs\\\\ca.pem\n",
        encoding="utf-8")
    cfg = TlsConfig.from_properties({"tls.config.file": str(conf)})
    # The mode comes from -Dtls.server.mode only, as upstream's TlsSystemConfig.
    assert cfg.mode is TlsMode.PERMISSIVE
    assert cfg.server_cert_path == "/etc/rocketmq/server.pem"
    assert cfg.server_key_path == "/etc/rocketmq/key.pem"
    assert cfg.server_key_password == "pa=ss:word"
    assert cfg.client_trust_cert_path == "C:\\certs\\ca.pem"


def test_a_missing_file_reads_as_empty(tmp_path: Path) -> None:
    cfg = TlsConfig.from_properties({"tls.config.file": str(tmp_path / "absent")})
    assert cfg.server_cert_path is None and cfg.mode is TlsMode.PERMISSIVE


def test_a_malformed_unicode_escape_names_the_file(tmp_path: Path) -> None:
    conf = tmp_path / "tls.properties"
    conf.write_text("tls.server.certPath=/x\\u00zz\n", encoding="utf-8")
    with pytest.raises(ValueError, match="TLS configuration file .*tls.properties"):
        TlsConfig.from_properties({"tls.config.file": str(conf)})
