"""The Spark sink and source with ``tls=true`` against a broker that refuses plain TCP
(``tls.server.mode=enforcing``, its certificate signed by a CA made here): rows written and
read back over TLS with the server verified against that CA; without ``tls`` the broker
refuses the sink; against another CA verification fails; the key password shows in no
options repr."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from aiorocketmq.spark_sink.options import parse_sink_options, parse_source_options
from tests.integration.test_tls import make_certs, tls_props
from tests.procs import ServerProcess, broker_process, namesrv_process

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return make_certs(tmp_path_factory.mktemp("spark-certs"))


@pytest.fixture(scope="module")
def tls_name_server(tmp_path_factory: pytest.TempPathFactory,
                    certs: dict[str, Path]) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("rmq-tls")
    ns: ServerProcess = namesrv_process(tmp, *tls_props(certs, "permissive")).start()
    broker = broker_process(tmp, ns.address, extra=tls_props(certs, "enforcing"))
    try:
        broker.start()
        yield ns.address
    finally:
        broker.stop()
        ns.stop()
        print(f"---- broker ----\n{broker.log_tail(40)}")


def test_tls_options_keep_the_key_password_out_of_reprs() -> None:
    opts = {"nameServer": "127.0.0.1:9876", "topic": "T", "tls": "true",
            "tlsCertFile": "/c.pem", "tlsKeyFile": "/k.pem", "tlsKeyPassword": "pem-secret"}
    for o in (parse_source_options(opts, streaming=False), parse_sink_options(opts)):
        assert "pem-secret" not in repr(o)
        assert o.client_config().tls_key_password == "pem-secret"


def test_sink_and_source_over_tls(spark: Any, tls_name_server: str, certs: dict[str, Path],
                                  tmp_path: Path) -> None:
    topic = "SparkTlsTopic"
    tls = {"tls": "true", "tlsVerify": "true", "tlsCaFile": str(certs["ca"])}
    df = spark.createDataFrame([(f"v{i}",) for i in range(20)], "value string")
    (df.write.format("rocketmq").option("nameServer", tls_name_server).option("topic", topic)
     .options(**tls).mode("append").save())
    batch = (spark.read.format("rocketmq").option("nameServer", tls_name_server)
             .option("topic", topic).options(**tls).load())
    assert sorted(bytes(r.body).decode() for r in batch.collect()) == sorted(
        f"v{i}" for i in range(20))

    stream = (spark.readStream.format("rocketmq").option("nameServer", tls_name_server)
              .option("topic", topic).option("startingOffsets", "earliest").options(**tls).load())
    query = (stream.writeStream.format("memory").queryName("tls_rows").trigger(availableNow=True)
             .option("checkpointLocation", str(tmp_path / "ckpt")).start())
    assert query.awaitTermination(180) and query.exception() is None
    assert spark.sql("SELECT * FROM tls_rows").count() == 20

    # Plain TCP: the broker refuses it.
    with pytest.raises(Exception, match="RemotingConnectError: connection to .* lost"):
        (df.write.format("rocketmq").option("nameServer", tls_name_server)
         .option("topic", topic).option("sendTimeoutMs", "2000").mode("append").save())
    # Verified against another CA: the handshake fails.
    other = make_certs(tmp_path)
    with pytest.raises(Exception, match="CERTIFICATE_VERIFY_FAILED|certificate verify failed"):
        (spark.read.format("rocketmq").option("nameServer", tls_name_server)
         .option("topic", topic).option("pullTimeoutMs", "3000").option("tls", "true")
         .option("tlsVerify", "true").option("tlsCaFile", str(other["ca"])).load().collect())
