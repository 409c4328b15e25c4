"""The Spark sink and source with ``accessKey`` / ``secretKey`` against an ACL-enabled broker
(aclEnable=true): rows written and read back; without the options the broker refuses; the
secret shows in no plan and no options repr."""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from aiorocketmq.spark_sink.options import parse_sink_options, parse_source_options
from tests.procs import ServerProcess, broker_process, namesrv_process

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]

SECRET = "spark-secret-123"


@pytest.fixture(scope="module")
def acl_name_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("rmq-acl")
    home = tmp / "home"
    (home / "conf").mkdir(parents=True)
    (home / "conf" / "plain_acl.yml").write_text(yaml.safe_dump({"accounts": [
        {"accessKey": "SparkUser", "secretKey": SECRET, "defaultTopicPerm": "PUB|SUB",
         "defaultGroupPerm": "SUB"}]}))
    ns: ServerProcess = namesrv_process(tmp).start()
    broker = broker_process(tmp, ns.address, conf={"aclEnable": "true"},
                            extra=(f"-Drocketmq.home.dir={home}",))
    try:
        broker.start()
        yield ns.address
    finally:
        broker.stop()
        ns.stop()
        print(f"---- broker ----\n{broker.log_tail(40)}")


def test_options_keep_the_secret_out_of_reprs() -> None:
    opts = {"nameServer": "127.0.0.1:9876", "topic": "T", "accessKey": "SparkUser",
            "secretKey": SECRET}
    source = parse_source_options(opts, streaming=False)
    sink = parse_sink_options(opts)
    assert source.credentials is not None and source.credentials.secret_key == SECRET
    for o in (source, sink):
        assert SECRET not in repr(o)
        assert pickle.loads(pickle.dumps(o)) == o
    with pytest.raises(ValueError, match="accessKey and secretKey go together"):
        parse_sink_options({"nameServer": "127.0.0.1:9876", "accessKey": "SparkUser"})


def test_sink_and_source_sign_their_requests(spark: Any, acl_name_server: str,
                                             tmp_path: Path) -> None:
    topic = "SparkAclTopic"
    creds = {"accessKey": "SparkUser", "secretKey": SECRET}
    df = spark.createDataFrame([(f"v{i}",) for i in range(20)], "value string")
    (df.write.format("rocketmq").option("nameServer", acl_name_server).option("topic", topic)
     .options(**creds).mode("append").save())
    reader = (spark.read.format("rocketmq").option("nameServer", acl_name_server)
              .option("topic", topic).options(**creds).load())
    back = reader.collect()
    assert sorted(bytes(r.body).decode() for r in back) == sorted(f"v{i}" for i in range(20))
    plan = reader._jdf.queryExecution().toString()
    assert SECRET not in plan
    with pytest.raises(Exception, match="No accessKey is configured"):
        (df.write.format("rocketmq").option("nameServer", acl_name_server).option("topic", topic)
         .mode("append").save())
