"""UPDATE_BROKER_CONFIG's checks (upstream ``Configuration.update`` + ``MixAll.properties2Object``).

Contract: ``plan_config_update(props, broker, store)`` returns the assignments a request's
``key=value`` properties make, or raises ``ConfigUpdateError`` whose message (the
SYSTEM_ERROR remark) names the first refused key; the caller applies the plan only when
every key passed, so a refused request changes nothing.

Upstream 4.9.7 answers SUCCESS to everything: a key that is not one of its fields is
dropped (``mergeIfExist``), a value that does not parse is swallowed by
``properties2Object`` (``catch (Throwable ignored)``) while GET_BROKER_CONFIG shows the new
text, and store-layout keys are set on the live ``MessageStoreConfig``:
``flushDiskType=SYNC_FLUSH`` on an ASYNC_FLUSH broker makes every later send fail
(``CommitLog.submitFlushRequest`` casts the running flush service to ``GroupCommitService``),
``mappedFileSizeConsumeQueue`` makes new queues with segments the next start refuses. We
refuse instead, naming the key:

* keys that are neither ours nor stock's (``STOCK_BROKER_KEYS`` lists every settable field
  of 4.9.7's ``BrokerConfig``, ``MessageStoreConfig``, ``NettyServerConfig`` and
  ``NettyClientConfig`` with its setter's Java type);
* values that do not parse as that Java type (``Integer.parseInt`` and friends; a boolean
  must be ``true`` or ``false``, where Java reads anything else as false) or that our own
  record refuses (``BrokerConfig`` / ``MessageStoreConfig`` checks, queue counts up to
  ``protocol.validation.MAX_QUEUE_NUMS``, integer durations and counts not negative);
* ``LIVE_REFUSED_KEYS``: the store's layout (paths, segment sizes, flush type, index
  geometry, role) and the broker's identity (name, cluster, id, addresses, port), which
  only a restart with an edited ``broker.conf`` may change: a store must always open with
  the files it has on disk.

Stock keys we do not implement are accepted, kept and shown by GET_BROKER_CONFIG, and have
no effect, as an upstream key with no reader has none.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any

from aiorocketmq.protocol.validation import MAX_QUEUE_NUMS
from aiorocketmq.server.store.config import MessageStoreConfig, store_key

from .config import BrokerConfig

__all__ = ["ConfigUpdateError", "plan_config_update", "STOCK_BROKER_KEYS", "LIVE_REFUSED_KEYS",
           "Assignment"]


class ConfigUpdateError(ValueError):
    """A key of an UPDATE_BROKER_CONFIG request that may not be applied; the message says why."""


# Generated from rocketmq-all-4.9.7's config classes: field name -> the Java type of the
# setter ``MixAll.properties2Object`` would call ("-": none it can call).
STOCK_BROKER_KEYS: Mapping[str, str] = {
    # BrokerConfig
    "rocketmqHome": "String",
    "namesrvAddr": "String",
    "brokerIP1": "String",
    "brokerIP2": "String",
    "brokerName": "String",
    "brokerClusterName": "String",
    "brokerId": "long",
    "brokerPermission": "int",
    "defaultTopicQueueNums": "int",
    "autoCreateTopicEnable": "boolean",
    "clusterTopicEnable": "boolean",
    "brokerTopicEnable": "boolean",
    "autoCreateSubscriptionGroup": "boolean",
    "messageStorePlugIn": "String",
    "msgTraceTopicName": "String",
    "traceTopicEnable": "boolean",
    "sendMessageThreadPoolNums": "int",
    "putMessageFutureThreadPoolNums": "int",
    "pullMessageThreadPoolNums": "int",
    "processReplyMessageThreadPoolNums": "int",
    "queryMessageThreadPoolNums": "int",
    "adminBrokerThreadPoolNums": "int",
    "clientManageThreadPoolNums": "int",
    "consumerManageThreadPoolNums": "int",
    "heartbeatThreadPoolNums": "int",
    "endTransactionThreadPoolNums": "int",
    "flushConsumerOffsetInterval": "int",
    "flushConsumerOffsetHistoryInterval": "int",
    "rejectTransactionMessage": "boolean",
    "fetchNamesrvAddrByAddressServer": "boolean",
    "sendThreadPoolQueueCapacity": "int",
    "putThreadPoolQueueCapacity": "int",
    "pullThreadPoolQueueCapacity": "int",
    "replyThreadPoolQueueCapacity": "int",
    "queryThreadPoolQueueCapacity": "int",
    "clientManagerThreadPoolQueueCapacity": "int",
    "consumerManagerThreadPoolQueueCapacity": "int",
    "heartbeatThreadPoolQueueCapacity": "int",
    "endTransactionPoolQueueCapacity": "int",
    "filterServerNums": "int",
    "longPollingEnable": "boolean",
    "shortPollingTimeMills": "long",
    "notifyConsumerIdsChangedEnable": "boolean",
    "highSpeedMode": "boolean",
    "commercialEnable": "boolean",
    "commercialTimerCount": "int",
    "commercialTransCount": "int",
    "commercialBigCount": "int",
    "commercialBaseCount": "int",
    "transferMsgByHeap": "boolean",
    "maxDelayTime": "int",
    "regionId": "String",
    "registerBrokerTimeoutMills": "int",
    "slaveReadEnable": "boolean",
    "disableConsumeIfConsumerReadSlowly": "boolean",
    "consumerFallbehindThreshold": "long",
    "brokerFastFailureEnable": "boolean",
    "waitTimeMillsInSendQueue": "long",
    "waitTimeMillsInPullQueue": "long",
    "waitTimeMillsInHeartbeatQueue": "long",
    "waitTimeMillsInTransactionQueue": "long",
    "startAcceptSendRequestTimeStamp": "long",
    "traceOn": "boolean",
    "enableCalcFilterBitMap": "boolean",
    "expectConsumerNumUseFilter": "int",
    "maxErrorRateOfBloomFilter": "int",
    "filterDataCleanTimeSpan": "long",
    "filterSupportRetry": "boolean",
    "enablePropertyFilter": "boolean",
    "compressedRegister": "boolean",
    "forceRegister": "boolean",
    "registerNameServerPeriod": "int",
    "transactionTimeOut": "long",
    "transactionCheckMax": "int",
    "transactionCheckInterval": "long",
    "aclEnable": "boolean",
    "storeReplyMessageEnable": "boolean",
    "enableDetailStat": "boolean",
    "autoDeleteUnusedStats": "boolean",
    "isolateLogEnable": "boolean",
    # MessageStoreConfig
    "storePathRootDir": "String",
    "storePathCommitLog": "String",
    "storePathDLedgerCommitLog": "String",
    "readOnlyCommitLogStorePaths": "String",
    "mappedFileSizeCommitLog": "int",
    "mappedFileSizeConsumeQueue": "int",
    "enableConsumeQueueExt": "boolean",
    "mappedFileSizeConsumeQueueExt": "int",
    "bitMapLengthConsumeQueueExt": "int",
    "flushIntervalCommitLog": "int",
    "commitIntervalCommitLog": "int",
    "useReentrantLockWhenPutMessage": "boolean",
    "flushCommitLogTimed": "boolean",
    "flushIntervalConsumeQueue": "int",
    "cleanResourceInterval": "int",
    "deleteCommitLogFilesInterval": "int",
    "deleteConsumeQueueFilesInterval": "int",
    "destroyMapedFileIntervalForcibly": "int",
    "redeleteHangedFileInterval": "int",
    "deleteWhen": "String",
    "diskMaxUsedSpaceRatio": "int",
    "fileReservedTime": "int",
    "putMsgIndexHightWater": "int",
    "maxMessageSize": "int",
    "checkCRCOnRecover": "boolean",
    "flushCommitLogLeastPages": "int",
    "commitCommitLogLeastPages": "int",
    "flushLeastPagesWhenWarmMapedFile": "int",
    "flushConsumeQueueLeastPages": "int",
    "flushCommitLogThoroughInterval": "int",
    "commitCommitLogThoroughInterval": "int",
    "flushConsumeQueueThoroughInterval": "int",
    "maxTransferBytesOnMessageInMemory": "int",
    "maxTransferCountOnMessageInMemory": "int",
    "maxTransferBytesOnMessageInDisk": "int",
    "maxTransferCountOnMessageInDisk": "int",
    "accessMessageInMemoryMaxRatio": "int",
    "messageIndexEnable": "boolean",
    "maxHashSlotNum": "int",
    "maxIndexNum": "int",
    "maxMsgsNumBatch": "int",
    "messageIndexSafe": "boolean",
    "haListenPort": "int",
    "haSendHeartbeatInterval": "int",
    "haHousekeepingInterval": "int",
    "haTransferBatchSize": "int",
    "haMasterAddress": "String",
    "haSlaveFallbehindMax": "int",
    "brokerRole": "String",
    "flushDiskType": "String",
    "syncFlushTimeout": "int",
    "slaveTimeout": "int",
    "messageDelayLevel": "String",
    "flushDelayOffsetInterval": "long",
    "cleanFileForciblyEnable": "boolean",
    "warmMapedFileEnable": "boolean",
    "offsetCheckInSlave": "boolean",
    "debugLockEnable": "boolean",
    "duplicationEnable": "boolean",
    "diskFallRecorded": "boolean",
    "osPageCacheBusyTimeOutMills": "long",
    "defaultQueryMaxNum": "int",
    "transientStorePoolEnable": "boolean",
    "transientStorePoolSize": "int",
    "fastFailIfNoBufferInStorePool": "boolean",
    "enableDLegerCommitLog": "boolean",
    "dLegerGroup": "String",
    "dLegerPeers": "String",
    "dLegerSelfId": "String",
    "preferredLeaderId": "String",
    "isEnableBatchPush": "-",
    "enableScheduleMessageStats": "boolean",
    "enableLmq": "boolean",
    "enableMultiDispatch": "boolean",
    "maxLmqConsumeQueueNum": "int",
    "enableScheduleAsyncDeliver": "boolean",
    "scheduleAsyncDeliverMaxPendingLimit": "int",
    "scheduleAsyncDeliverMaxResendNum2Blocked": "int",
    # NettyServerConfig
    "listenPort": "int",
    "serverWorkerThreads": "int",
    "serverCallbackExecutorThreads": "int",
    "serverSelectorThreads": "int",
    "serverOnewaySemaphoreValue": "int",
    "serverAsyncSemaphoreValue": "int",
    "serverChannelMaxIdleTimeSeconds": "int",
    "serverSocketSndBufSize": "int",
    "serverSocketRcvBufSize": "int",
    "serverSocketBacklog": "int",
    "serverPooledByteBufAllocatorEnable": "boolean",
    "useEpollNativeSelector": "boolean",
    # NettyClientConfig
    "writeBufferHighWaterMark": "int",
    "writeBufferLowWaterMark": "int",
    "clientWorkerThreads": "int",
    "clientCallbackExecutorThreads": "int",
    "clientOnewaySemaphoreValue": "int",
    "clientAsyncSemaphoreValue": "int",
    "connectTimeoutMillis": "int",
    "channelNotActiveInterval": "long",
    "clientChannelMaxIdleTimeSeconds": "int",
    "clientSocketSndBufSize": "int",
    "clientSocketRcvBufSize": "int",
    "clientPooledByteBufAllocatorEnable": "boolean",
    "clientCloseSocketIfTimeout": "boolean",
    "useTLS": "boolean",
}

LIVE_REFUSED_KEYS = frozenset({
    # store layout: what the files on disk were made with
    "storePathRootDir", "storePathCommitLog", "storePathDLedgerCommitLog",
    "mappedFileSizeCommitLog", "mapedFileSizeCommitLog", "mappedFileSizeConsumeQueue",
    "mapedFileSizeConsumeQueue", "mappedFileSizeConsumeQueueExt", "enableConsumeQueueExt",
    "bitMapLengthConsumeQueueExt", "flushDiskType", "maxHashSlotNum", "maxIndexNum",
    "brokerRole", "enableDLegerCommitLog", "dLegerGroup", "dLegerPeers", "dLegerSelfId",
    "transientStorePoolEnable",
    "transientStorePoolSize", "warmMapedFileEnable",
    # identity: what the nameservers and clients know this broker by
    "listenPort", "brokerName", "brokerClusterName", "brokerId", "brokerIP1", "brokerIP2",
    "haListenPort", "rocketmqHome",
})

_INT_RANGES = {"int": (-(2**31), 2**31 - 1), "long": (-(2**63), 2**63 - 1)}
_JAVA_INT = re.compile(r"[+-]?[0-9]+")
_JAVA_FLOAT = re.compile(r"[+-]?(NaN|Infinity|([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?)[fFdD]?")
# Our keys whose values are queue counts.
_QUEUE_COUNT_KEYS = frozenset({"defaultTopicQueueNums"})

Assignment = tuple[Any, str, Any]  # (record or dict, attribute or key, value)


def _broker_fields() -> dict[str, str]:
    return {f.metadata["key"]: f.name for f in dataclasses.fields(BrokerConfig)}


def _store_fields() -> dict[str, str]:
    return {store_key(f.name): f.name for f in dataclasses.fields(MessageStoreConfig)}


def _check_java_syntax(key: str, value: str, java_type: str) -> None:
    text = value.strip()
    if java_type in _INT_RANGES:
        lo, hi = _INT_RANGES[java_type]
        if not _JAVA_INT.fullmatch(text) or not lo <= int(text) <= hi:
            raise ConfigUpdateError(f"{key}={value!r} is not a Java {java_type}")
    elif java_type == "boolean":
        if text.lower() not in ("true", "false"):
            raise ConfigUpdateError(f"{key}={value!r} is not a boolean (true or false)")
    elif java_type in ("double", "float"):
        if not _JAVA_FLOAT.fullmatch(text):
            raise ConfigUpdateError(f"{key}={value!r} is not a Java {java_type}")


def _check_ours(key: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        return
    if key in _QUEUE_COUNT_KEYS and not 1 <= value <= MAX_QUEUE_NUMS:
        raise ConfigUpdateError(f"{key}={value} is outside 1..{MAX_QUEUE_NUMS}")
    if value < 0:
        raise ConfigUpdateError(f"{key}={value} is negative")


def plan_config_update(props: Mapping[str, str], broker: BrokerConfig,
                       store: MessageStoreConfig, extra: dict[str, str]) -> list[Assignment]:
    """The assignments ``props`` make to ``broker``, ``store`` and ``extra`` (unimplemented keys).

    Raises:
        ConfigUpdateError: the first key (in sorted order) that is refused, and why.
    """
    plan: list[Assignment] = []
    broker_changes: dict[str, Any] = {}
    store_changes: dict[str, Any] = {}
    records: tuple[tuple[type[BrokerConfig] | type[MessageStoreConfig], Any, dict[str, str],
                         dict[str, Any]], ...] = (
        (BrokerConfig, broker, _broker_fields(), broker_changes),
        (MessageStoreConfig, store, _store_fields(), store_changes))
    for key in sorted(props):
        value = props[key]
        if key in LIVE_REFUSED_KEYS:
            raise ConfigUpdateError(
                f"{key} can not be changed on a running broker; set it in broker.conf and "
                f"restart")
        java_type = STOCK_BROKER_KEYS.get(key)
        if java_type is not None:
            _check_java_syntax(key, value, java_type)
        try:
            for cls, record, fields, changes in records:
                if key in fields:
                    name = fields[key]
                    parsed = getattr(cls.from_properties({key: value}), name)
                    _check_ours(key, parsed)
                    changes[name] = parsed
                    plan.append((record, name, parsed))
                    break
            else:
                if java_type is None:
                    raise ConfigUpdateError(f"{key} is not a broker configuration key")
                plan.append((extra, key, value))
        except ConfigUpdateError:
            raise
        except (ValueError, TypeError) as exc:
            raise ConfigUpdateError(f"{key}={value!r}: {exc}") from exc
    # The records' own cross-field checks, on copies: nothing live changes if they fail.
    try:
        dataclasses.replace(broker, **broker_changes)
        dataclasses.replace(store, **store_changes)
    except (ValueError, TypeError) as exc:
        raise ConfigUpdateError(str(exc)) from exc
    return plan
