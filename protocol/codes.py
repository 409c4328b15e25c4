"""Every numeric and named constant of the remoting protocol, defined once.

Sources (docs/PROTOCOL.md sections 2-6): ``RequestCode.java``, ``ResponseCode.java``,
``RemotingSysResponseCode.java``, ``LanguageCode.java``, ``SerializeType.java``,
``PermName.java``, ``MessageSysFlag.java``, ``PullSysFlag.java``,
``TopicSysFlag.java``, ``MessageConst.java``, ``MixAll.java``, ``MQVersion.java``
of rocketmq-all-4.9.8 (5.x additions marked).
"""

from __future__ import annotations

from enum import IntEnum, IntFlag

__all__ = [
    "RequestCode",
    "ResponseCode",
    "LanguageCode",
    "SerializeType",
    "RpcFlag",
    "Perm",
    "MessageSysFlag",
    "PullSysFlag",
    "TopicSysFlag",
    "MessageConst",
    "MQVersion",
    "SystemTopic",
    "MixAll",
    "CURRENT_VERSION",
]


class RequestCode(IntEnum):
    """Request codes (docs/PROTOCOL.md 3.6)."""

    SEND_MESSAGE = 10
    PULL_MESSAGE = 11
    QUERY_MESSAGE = 12
    QUERY_BROKER_OFFSET = 13
    QUERY_CONSUMER_OFFSET = 14
    UPDATE_CONSUMER_OFFSET = 15
    UPDATE_AND_CREATE_TOPIC = 17
    GET_ALL_TOPIC_CONFIG = 21
    GET_TOPIC_CONFIG_LIST = 22
    GET_TOPIC_NAME_LIST = 23
    UPDATE_BROKER_CONFIG = 25
    GET_BROKER_CONFIG = 26
    TRIGGER_DELETE_FILES = 27
    GET_BROKER_RUNTIME_INFO = 28
    SEARCH_OFFSET_BY_TIMESTAMP = 29
    GET_MAX_OFFSET = 30
    GET_MIN_OFFSET = 31
    GET_EARLIEST_MSG_STORETIME = 32
    VIEW_MESSAGE_BY_ID = 33
    HEART_BEAT = 34
    UNREGISTER_CLIENT = 35
    CONSUMER_SEND_MSG_BACK = 36
    END_TRANSACTION = 37
    GET_CONSUMER_LIST_BY_GROUP = 38
    CHECK_TRANSACTION_STATE = 39
    NOTIFY_CONSUMER_IDS_CHANGED = 40
    LOCK_BATCH_MQ = 41
    UNLOCK_BATCH_MQ = 42
    GET_ALL_CONSUMER_OFFSET = 43
    GET_ALL_DELAY_OFFSET = 45
    CHECK_CLIENT_CONFIG = 46
    UPDATE_AND_CREATE_ACL_CONFIG = 50
    DELETE_ACL_CONFIG = 51
    GET_BROKER_CLUSTER_ACL_INFO = 52
    UPDATE_GLOBAL_WHITE_ADDRS_CONFIG = 53
    GET_BROKER_CLUSTER_ACL_CONFIG = 54
    GET_TIMER_CHECK_POINT = 60  # 5.x: the timer store's checkpoint (a slave's sync)
    GET_TIMER_METRICS = 61  # 5.x: the timer store's pending timers per topic
    PUT_KV_CONFIG = 100
    GET_KV_CONFIG = 101
    DELETE_KV_CONFIG = 102
    REGISTER_BROKER = 103
    UNREGISTER_BROKER = 104
    GET_ROUTEINFO_BY_TOPIC = 105
    GET_BROKER_CLUSTER_INFO = 106
    UPDATE_AND_CREATE_SUBSCRIPTIONGROUP = 200
    GET_ALL_SUBSCRIPTIONGROUP_CONFIG = 201
    GET_TOPIC_STATS_INFO = 202
    GET_CONSUMER_CONNECTION_LIST = 203
    GET_PRODUCER_CONNECTION_LIST = 204
    WIPE_WRITE_PERM_OF_BROKER = 205
    GET_ALL_TOPIC_LIST_FROM_NAMESERVER = 206
    DELETE_SUBSCRIPTIONGROUP = 207
    GET_CONSUME_STATS = 208
    SUSPEND_CONSUMER = 209
    RESUME_CONSUMER = 210
    RESET_CONSUMER_OFFSET_IN_CONSUMER = 211
    RESET_CONSUMER_OFFSET_IN_BROKER = 212
    ADJUST_CONSUMER_THREAD_POOL = 213
    WHO_CONSUME_THE_MESSAGE = 214
    DELETE_TOPIC_IN_BROKER = 215
    DELETE_TOPIC_IN_NAMESRV = 216
    GET_KVLIST_BY_NAMESPACE = 219
    RESET_CONSUMER_CLIENT_OFFSET = 220
    GET_CONSUMER_STATUS_FROM_CLIENT = 221
    INVOKE_BROKER_TO_RESET_OFFSET = 222
    INVOKE_BROKER_TO_GET_CONSUMER_STATUS = 223
    GET_TOPICS_BY_CLUSTER = 224
    QUERY_TOPIC_CONSUME_BY_WHO = 300
    REGISTER_FILTER_SERVER = 301
    REGISTER_MESSAGE_FILTER_CLASS = 302
    QUERY_CONSUME_TIME_SPAN = 303
    GET_SYSTEM_TOPIC_LIST_FROM_NS = 304
    GET_SYSTEM_TOPIC_LIST_FROM_BROKER = 305
    CLEAN_EXPIRED_CONSUMEQUEUE = 306
    GET_CONSUMER_RUNNING_INFO = 307
    QUERY_CORRECTION_OFFSET = 308
    CONSUME_MESSAGE_DIRECTLY = 309
    SEND_MESSAGE_V2 = 310
    GET_UNIT_TOPIC_LIST = 311
    GET_HAS_UNIT_SUB_TOPIC_LIST = 312
    GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST = 313
    CLONE_GROUP_OFFSET = 314
    VIEW_BROKER_STATS_DATA = 315
    CLEAN_UNUSED_TOPIC = 316
    GET_BROKER_CONSUME_STATS = 317
    UPDATE_NAMESRV_CONFIG = 318
    GET_NAMESRV_CONFIG = 319
    SEND_BATCH_MESSAGE = 320
    QUERY_CONSUME_QUEUE = 321
    QUERY_DATA_VERSION = 322
    RESUME_CHECK_HALF_MESSAGE = 323
    SEND_REPLY_MESSAGE = 324
    SEND_REPLY_MESSAGE_V2 = 325
    PUSH_REPLY_MESSAGE_TO_CLIENT = 326
    ADD_WRITE_PERM_OF_BROKER = 327
    GET_ALL_PRODUCER_INFO = 328
    DELETE_EXPIRED_COMMITLOG = 329
    LITE_PULL_MESSAGE = 361  # 5.x


class ResponseCode(IntEnum):
    """Response codes (docs/PROTOCOL.md 3.7); 0-4 are RemotingSysResponseCode."""

    SUCCESS = 0
    SYSTEM_ERROR = 1
    SYSTEM_BUSY = 2
    REQUEST_CODE_NOT_SUPPORTED = 3
    TRANSACTION_FAILED = 4
    FLUSH_DISK_TIMEOUT = 10
    SLAVE_NOT_AVAILABLE = 11
    FLUSH_SLAVE_TIMEOUT = 12
    MESSAGE_ILLEGAL = 13
    SERVICE_NOT_AVAILABLE = 14
    VERSION_NOT_SUPPORTED = 15
    NO_PERMISSION = 16
    TOPIC_NOT_EXIST = 17
    TOPIC_EXIST_ALREADY = 18
    PULL_NOT_FOUND = 19
    PULL_RETRY_IMMEDIATELY = 20
    PULL_OFFSET_MOVED = 21
    QUERY_NOT_FOUND = 22
    SUBSCRIPTION_PARSE_FAILED = 23
    SUBSCRIPTION_NOT_EXIST = 24
    SUBSCRIPTION_NOT_LATEST = 25
    SUBSCRIPTION_GROUP_NOT_EXIST = 26
    FILTER_DATA_NOT_EXIST = 27
    FILTER_DATA_NOT_LATEST = 28
    TRANSACTION_SHOULD_COMMIT = 200
    TRANSACTION_SHOULD_ROLLBACK = 201
    TRANSACTION_STATE_UNKNOW = 202
    TRANSACTION_STATE_GROUP_WRONG = 203
    NO_BUYER_ID = 204
    NOT_IN_CURRENT_UNIT = 205
    CONSUMER_NOT_ONLINE = 206
    CONSUME_MSG_TIMEOUT = 207
    NO_MESSAGE = 208
    UPDATE_AND_CREATE_ACL_CONFIG_FAILED = 209
    DELETE_ACL_CONFIG_FAILED = 210
    UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED = 211
    FLOW_CONTROL = 215


class LanguageCode(IntEnum):
    """Sender language; the JSON header carries the name, the binary header the byte."""

    JAVA = 0
    CPP = 1
    DOTNET = 2
    PYTHON = 3
    DELPHI = 4
    ERLANG = 5
    RUBY = 6
    OTHER = 7
    HTTP = 8
    GO = 9
    PHP = 10
    OMS = 11
    RUST = 12
    NODE_JS = 13


class SerializeType(IntEnum):
    """High byte of the header-length word (docs/PROTOCOL.md 1)."""

    JSON = 0
    ROCKETMQ = 1


class RpcFlag(IntFlag):
    """Bits of RemotingCommand.flag."""

    RESPONSE = 1  # RPC_TYPE
    ONEWAY = 2  # RPC_ONEWAY


# The bits as plain ints: Flag arithmetic (``perm & Perm.READ``) is Python code in enum,
# about 1 µs, and these checks run on every pull and send.
_INHERIT, _WRITE, _READ = 1, 2, 4


class Perm(IntFlag):
    """PermName bits (docs/PROTOCOL.md 6.8)."""

    INHERIT = _INHERIT
    WRITE = _WRITE
    READ = _READ
    PRIORITY = 8

    @staticmethod
    def readable(perm: int) -> bool:
        return bool(perm & _READ)

    @staticmethod
    def writeable(perm: int) -> bool:
        return bool(perm & _WRITE)

    @staticmethod
    def inherited(perm: int) -> bool:
        return bool(perm & _INHERIT)

    @staticmethod
    def to_string(perm: int) -> str:
        """``PermName.perm2String``: e.g. 6 -> ``RW-``."""
        return (
            ("R" if perm & Perm.READ else "-")
            + ("W" if perm & Perm.WRITE else "-")
            + ("X" if perm & Perm.INHERIT else "-")
        )


class MessageSysFlag:
    """Message sysFlag bits (docs/PROTOCOL.md 5.3)."""

    COMPRESSED_FLAG = 0x1
    MULTI_TAGS_FLAG = 0x2
    TRANSACTION_NOT_TYPE = 0x0
    TRANSACTION_PREPARED_TYPE = 0x4
    TRANSACTION_COMMIT_TYPE = 0x8
    TRANSACTION_ROLLBACK_TYPE = 0xC
    BORNHOST_V6_FLAG = 0x10
    STOREHOSTADDRESS_V6_FLAG = 0x20
    NEED_UNWRAP_FLAG = 0x40
    INNER_BATCH_FLAG = 0x80
    COMPRESSION_TYPE_MASK = 0x700
    COMPRESSION_LZ4 = 0x100
    COMPRESSION_ZSTD = 0x200
    COMPRESSION_ZLIB = 0x300

    @staticmethod
    def transaction_value(flag: int) -> int:
        return flag & 0xC

    @staticmethod
    def reset_transaction_value(flag: int, tx_type: int) -> int:
        return (flag & ~0xC) | tx_type


class PullSysFlag:
    """PULL_MESSAGE header sysFlag bits (docs/PROTOCOL.md 4.2)."""

    COMMIT_OFFSET = 0x1
    SUSPEND = 0x2
    SUBSCRIPTION = 0x4
    CLASS_FILTER = 0x8
    LITE_PULL = 0x10

    @staticmethod
    def build(
        commit_offset: bool, suspend: bool, subscription: bool, class_filter: bool = False,
        lite_pull: bool = False,
    ) -> int:
        flag = 0
        if commit_offset:
            flag |= PullSysFlag.COMMIT_OFFSET
        if suspend:
            flag |= PullSysFlag.SUSPEND
        if subscription:
            flag |= PullSysFlag.SUBSCRIPTION
        if class_filter:
            flag |= PullSysFlag.CLASS_FILTER
        if lite_pull:
            flag |= PullSysFlag.LITE_PULL
        return flag


class TopicSysFlag:
    UNIT = 0x1
    UNIT_SUB = 0x2


class MessageConst:
    """Message property keys (``MessageConst.java``)."""

    PROPERTY_KEYS = "KEYS"
    PROPERTY_TAGS = "TAGS"
    PROPERTY_WAIT_STORE_MSG_OK = "WAIT"
    PROPERTY_DELAY_TIME_LEVEL = "DELAY"
    PROPERTY_RETRY_TOPIC = "RETRY_TOPIC"
    PROPERTY_REAL_TOPIC = "REAL_TOPIC"
    PROPERTY_REAL_QUEUE_ID = "REAL_QID"
    PROPERTY_TRANSACTION_PREPARED = "TRAN_MSG"
    PROPERTY_PRODUCER_GROUP = "PGROUP"
    PROPERTY_MIN_OFFSET = "MIN_OFFSET"
    PROPERTY_MAX_OFFSET = "MAX_OFFSET"
    PROPERTY_BUYER_ID = "BUYER_ID"
    PROPERTY_ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
    PROPERTY_TRANSFER_FLAG = "TRANSFER_FLAG"
    PROPERTY_CORRECTION_FLAG = "CORRECTION_FLAG"
    PROPERTY_MQ2_FLAG = "MQ2_FLAG"
    PROPERTY_RECONSUME_TIME = "RECONSUME_TIME"
    PROPERTY_MSG_REGION = "MSG_REGION"
    PROPERTY_TRACE_SWITCH = "TRACE_ON"
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX = "UNIQ_KEY"
    PROPERTY_MAX_RECONSUME_TIMES = "MAX_RECONSUME_TIMES"
    PROPERTY_CONSUME_START_TIMESTAMP = "CONSUME_START_TIME"
    PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET = "TRAN_PREPARED_QUEUE_OFFSET"
    PROPERTY_TRANSACTION_CHECK_TIMES = "TRANSACTION_CHECK_TIMES"
    PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS = "CHECK_IMMUNITY_TIME_IN_SECONDS"
    PROPERTY_INSTANCE_ID = "INSTANCE_ID"
    PROPERTY_CORRELATION_ID = "CORRELATION_ID"
    PROPERTY_MESSAGE_REPLY_TO_CLIENT = "REPLY_TO_CLIENT"
    PROPERTY_MESSAGE_TTL = "TTL"
    PROPERTY_REPLY_MESSAGE_ARRIVE_TIME = "ARRIVE_TIME"
    PROPERTY_PUSH_REPLY_TIME = "PUSH_REPLY_TIME"
    PROPERTY_CLUSTER = "CLUSTER"
    PROPERTY_MESSAGE_TYPE = "MSG_TYPE"
    PROPERTY_INNER_MULTI_DISPATCH = "INNER_MULTI_DISPATCH"
    PROPERTY_INNER_MULTI_QUEUE_OFFSET = "INNER_MULTI_QUEUE_OFFSET"
    # Timer messages (RocketMQ 5.x MessageConst; server/store/timer). Not in SYSTEM_KEYS:
    # 4.9's set has none of them, so a 4.9 client sets them as user properties.
    PROPERTY_TIMER_DELAY_SEC = "TIMER_DELAY_SEC"
    PROPERTY_TIMER_DELAY_MS = "TIMER_DELAY_MS"
    PROPERTY_TIMER_DELIVER_MS = "TIMER_DELIVER_MS"
    PROPERTY_TIMER_ENQUEUE_MS = "TIMER_ENQUEUE_MS"
    PROPERTY_TIMER_DEQUEUE_MS = "TIMER_DEQUEUE_MS"
    PROPERTY_TIMER_ROLL_TIMES = "TIMER_ROLL_TIMES"
    PROPERTY_TIMER_OUT_MS = "TIMER_OUT_MS"
    PROPERTY_TIMER_DEL_UNIQKEY = "TIMER_DEL_UNIQKEY"

    KEY_SEPARATOR = " "
    NAME_VALUE_SEPARATOR = "\x01"
    PROPERTY_SEPARATOR = "\x02"
    REPLY_MESSAGE_FLAG = "reply"

    # Keys a user may not set through put_user_property (MessageConst.STRING_HASH_SET).
    SYSTEM_KEYS = frozenset(
        {
            "TRACE_ON", "MSG_REGION", "KEYS", "TAGS", "WAIT", "DELAY", "RETRY_TOPIC",
            "REAL_TOPIC", "REAL_QID", "TRAN_MSG", "PGROUP", "MIN_OFFSET", "MAX_OFFSET",
            "BUYER_ID", "ORIGIN_MESSAGE_ID", "TRANSFER_FLAG", "CORRECTION_FLAG", "MQ2_FLAG",
            "RECONSUME_TIME", "UNIQ_KEY", "MAX_RECONSUME_TIMES", "CONSUME_START_TIME",
            "TRAN_PREPARED_QUEUE_OFFSET", "TRANSACTION_CHECK_TIMES",
            "CHECK_IMMUNITY_TIME_IN_SECONDS", "INSTANCE_ID", "CORRELATION_ID",
            "REPLY_TO_CLIENT", "TTL", "ARRIVE_TIME", "PUSH_REPLY_TIME", "CLUSTER",
            "MSG_TYPE",
        }
    )


class MQVersion:
    """Ordinals of ``MQVersion.Version`` that matter on the wire (docs/PROTOCOL.md 2.5)."""

    V3_0_7_SNAPSHOT = 28
    V3_0_11 = 37
    V3_1_8_SNAPSHOT = 62
    V3_4_9 = 121
    V4_0_0 = 213
    V4_1_0_SNAPSHOT = 232
    V4_9_0 = 393
    V4_9_3 = 399
    V4_9_4 = 401
    V4_9_5 = 403
    V4_9_6 = 405
    V4_9_7 = 407
    V4_9_8 = 409
    V5_0_0 = 413

    _NAMES: dict[int, str] = {}

    @classmethod
    def desc(cls, version: int) -> str:
        """``MQVersion.getVersionDesc``: the enum name for a known ordinal."""
        if not cls._NAMES:
            for name, value in vars(cls).items():
                if name.startswith("V") and isinstance(value, int):
                    cls._NAMES[value] = name
        return cls._NAMES.get(version, f"V_UNKNOWN_{version}")


# What we stamp on every command we create: we implement the 4.9.8 protocol.
CURRENT_VERSION = MQVersion.V4_9_8


class SystemTopic:
    """Topic names with a fixed meaning (``MixAll``, ``TopicValidator``, ``TopicConfigManager``)."""

    AUTO_CREATE_TOPIC_KEY = "TBW102"
    SELF_TEST_TOPIC = "SELF_TEST_TOPIC"
    BENCHMARK_TOPIC = "BenchmarkTest"
    OFFSET_MOVED_EVENT = "OFFSET_MOVED_EVENT"
    SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
    TRANS_HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
    TRANS_OP_HALF_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
    TRANS_CHECK_MAX_TIME_TOPIC = "TRANS_CHECK_MAX_TIME_TOPIC"
    TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
    REPLY_TOPIC_POSTFIX = "REPLY_TOPIC"
    SYSTEM_TOPIC_PREFIX = "rmq_sys_"
    TIMER_TOPIC = "rmq_sys_wheel_timer"  # TimerMessageStore.TIMER_TOPIC (5.x)

    # TopicValidator.NOT_ALLOWED_SEND_TOPIC_SET
    NOT_ALLOWED_SEND = frozenset(
        {
            SCHEDULE_TOPIC, TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC, TRANS_CHECK_MAX_TIME_TOPIC,
            SELF_TEST_TOPIC, OFFSET_MOVED_EVENT,
        }
    )
    # TopicValidator.SYSTEM_TOPIC_SET (cluster and broker-name topics are added at runtime)
    SYSTEM_TOPICS = frozenset(
        {
            AUTO_CREATE_TOPIC_KEY, SCHEDULE_TOPIC, BENCHMARK_TOPIC, TRANS_HALF_TOPIC,
            TRANS_OP_HALF_TOPIC, TRANS_CHECK_MAX_TIME_TOPIC, SELF_TEST_TOPIC,
            OFFSET_MOVED_EVENT, TRACE_TOPIC,
        }
    )


class MixAll:
    """Names and defaults from ``MixAll.java``."""

    DEFAULT_PRODUCER_GROUP = "DEFAULT_PRODUCER"
    DEFAULT_CONSUMER_GROUP = "DEFAULT_CONSUMER"
    TOOLS_CONSUMER_GROUP = "TOOLS_CONSUMER"
    NAMESRV_ADDR_ENV = "NAMESRV_ADDR"  # read when no address is configured
    NAMESRV_ADDR_PROPERTY = "rocketmq.namesrv.addr"  # the Java system property of the same
    FILTERSRV_CONSUMER_GROUP = "FILTERSRV_CONSUMER"
    MONITOR_CONSUMER_GROUP = "__MONITOR_CONSUMER"
    CLIENT_INNER_PRODUCER_GROUP = "CLIENT_INNER_PRODUCER"
    SELF_TEST_PRODUCER_GROUP = "SELF_TEST_P_GROUP"
    SELF_TEST_CONSUMER_GROUP = "SELF_TEST_C_GROUP"
    ONS_HTTP_PROXY_GROUP = "CID_ONS-HTTP-PROXY"
    CID_ONSAPI_PERMISSION_GROUP = "CID_ONSAPI_PERMISSION"
    CID_ONSAPI_OWNER_GROUP = "CID_ONSAPI_OWNER"
    CID_ONSAPI_PULL_GROUP = "CID_ONSAPI_PULL"
    CID_RMQ_SYS_PREFIX = "CID_RMQ_SYS_"
    RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
    DLQ_GROUP_TOPIC_PREFIX = "%DLQ%"
    REPLY_TOPIC_POSTFIX = "REPLY_TOPIC"
    MASTER_ID = 0
    DEFAULT_NAMESRV_PORT = 9876
    DEFAULT_BROKER_PORT = 10911
    DEFAULT_TRACE_REGION_ID = "DefaultRegion"
    UNIQUE_MSG_QUERY_FLAG = "_UNIQUE_KEY_QUERY"
    DEFAULT_CHARSET = "utf-8"
    ORDER_TOPIC_CONFIG_NAMESPACE = "ORDER_TOPIC_CONFIG"
    ZONE_NAME = "__ZONE_NAME"

    @staticmethod
    def retry_topic(group: str) -> str:
        return "%RETRY%" + group

    @staticmethod
    def dlq_topic(group: str) -> str:
        return "%DLQ%" + group

    @staticmethod
    def reply_topic(cluster: str) -> str:
        return cluster + "_" + MixAll.REPLY_TOPIC_POSTFIX

    @staticmethod
    def is_sys_consumer_group(group: str) -> bool:
        return group.startswith(MixAll.CID_RMQ_SYS_PREFIX)
