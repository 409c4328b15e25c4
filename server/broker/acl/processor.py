"""The ACL admin requests, as the ACL part of upstream ``AdminBrokerProcessor`` (4.9.7).

* UPDATE_AND_CREATE_ACL_CONFIG (50): header ``accessKey``, ``secretKey``,
  ``whiteRemoteAddress``, ``admin`` (``Boolean.parseBoolean``, untrimmed),
  ``defaultTopicPerm``, ``defaultGroupPerm``, ``topicPerms`` / ``groupPerms`` (comma
  lists). SUCCESS, or UPDATE_AND_CREATE_ACL_CONFIG_FAILED (209) with the error's message
  as remark (no ``accessKey``: ``The accessKey=null and secretKey=...``).
* DELETE_ACL_CONFIG (51): ``accessKey``. SUCCESS, or DELETE_ACL_CONFIG_FAILED (210) with
  ``The accesskey[<ak>] corresponding to accessConfig has been deleted failed.`` (``null``
  when absent).
* UPDATE_GLOBAL_WHITE_ADDRS_CONFIG (53): ``globalWhiteAddrs`` (comma list),
  ``aclFileFullPath`` (absent or empty: the default plain_acl.yml). SUCCESS, or
  UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED (211) with
  ``The globalWhiteAddresses[<list>] has been updated failed.`` (``null`` when absent).

The server's edge decodes the headers of 50, 51 and 53 (``headers.decode_header``). None
of their fields is required there: stock 4.9.7's decoder leaves a missing ``@CFNotNull``
field null and these handlers answer it as above (``protocol/headers.py``).
* GET_BROKER_CLUSTER_ACL_INFO (52): header ``version`` (the default file's DataVersion
  JSON), ``allAclFileVersion`` (``{path: DataVersion}`` JSON), ``brokerName``,
  ``brokerAddr``, ``clusterName``.
* GET_BROKER_CLUSTER_ACL_CONFIG (54, 4.9.7 only): body
  ``{"globalWhiteAddrs":[...],"plainAccessConfigs":[...]}``.

With ACL off the stock broker has no validator and fails each of these with a
NullPointerException: 50 / 51 / 53 answer their FAILED code with no remark, 52 / 54 are not
answered at all. We do the same (the caller times out on 52 / 54).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.channel import Channel, Handler
from aiorocketmq.protocol.codes import RequestCode, ResponseCode
from aiorocketmq.protocol.command import RemotingCommand
from aiorocketmq.protocol.headers import (
    CreateAccessConfigRequestHeader,
    DeleteAccessConfigRequestHeader,
    UpdateGlobalWhiteAddrsConfigRequestHeader,
    decode_header,
)
from aiorocketmq.protocol.javautil import java_hashmap_order

from .errors import AclError
from .plain_permission import PlainAccessConfig, PlainPermissionManager, java_split
from .validator import PlainAccessValidator

__all__ = ["AclAdminProcessor"]

log = get_logger("aiorocketmq.broker.acl")


def _jstr(value: str | None) -> str:
    """Java's string concatenation of a possibly null String."""
    return "null" if value is None else value


def _json(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


class AclAdminProcessor:
    """Handlers for request codes 50-54 (module docstring)."""

    def __init__(self, validator: PlainAccessValidator | None,
                 identity: Callable[[], tuple[str, str, str]]) -> None:
        """``identity()`` -> (brokerName, brokerAddr, clusterName) at answer time."""
        self.validator = validator
        self._identity = identity

    def handlers(self) -> dict[int, Handler]:
        return {
            RequestCode.UPDATE_AND_CREATE_ACL_CONFIG: self.update_and_create_access_config,
            RequestCode.DELETE_ACL_CONFIG: self.delete_access_config,
            RequestCode.GET_BROKER_CLUSTER_ACL_INFO: self.get_broker_acl_config_version,
            RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG: self.update_global_white_addrs_config,
            RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG: self.get_broker_cluster_acl_config,
        }

    def _change(self, channel: Channel, request: RemotingCommand, failed: int,
                change: Callable[[PlainPermissionManager], bool], refused_remark: str, *,
                error_event: str | None = None, done_event: str | None = None,
                **fields: str) -> RemotingCommand:
        """Apply ``change`` to the manager: the ``failed`` response when it raises ``AclError``
        (also when ACL is off; logged as ``error_event`` if given) or returns False; SUCCESS
        (logged as ``done_event`` if given) when it succeeded."""
        try:
            if self.validator is None:
                raise AclError(None)
            ok = change(self.validator.manager)
        except AclError as exc:
            if error_event is not None:
                log.error(error_event, **fields, error=str(exc))
            return request.create_response(failed, exc.message)
        if not ok:
            return request.create_response(failed, refused_remark)
        if done_event is not None:
            log.info(done_event, **fields, peer=channel.remote_addr)
        return request.create_response(ResponseCode.SUCCESS)

    def update_and_create_access_config(self, channel: Channel,
                                        request: RemotingCommand) -> RemotingCommand:
        header = decode_header(CreateAccessConfigRequestHeader, request)
        ak = _jstr(header.access_key)
        config = PlainAccessConfig(
            access_key=header.access_key, secret_key=header.secret_key,
            white_remote_address=header.white_remote_address, admin=header.admin,
            default_topic_perm=header.default_topic_perm,
            default_group_perm=header.default_group_perm,
            topic_perms=java_split(header.topic_perms, ","),
            group_perms=java_split(header.group_perms, ","))
        return self._change(
            channel, request, ResponseCode.UPDATE_AND_CREATE_ACL_CONFIG_FAILED,
            lambda manager: manager.update_access_config(config),
            f"The accesskey[{ak}] corresponding to accessConfig has been updated failed.",
            error_event="acl.update_failed", done_event="acl.account_updated", access_key=ak)

    def delete_access_config(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        access_key = decode_header(DeleteAccessConfigRequestHeader, request).access_key
        ak = _jstr(access_key)
        return self._change(
            channel, request, ResponseCode.DELETE_ACL_CONFIG_FAILED,
            lambda manager: manager.delete_access_config(access_key),
            f"The accesskey[{ak}] corresponding to accessConfig has been deleted failed.",
            error_event="acl.delete_failed", done_event="acl.account_deleted", access_key=ak)

    def update_global_white_addrs_config(self, channel: Channel,
                                         request: RemotingCommand) -> RemotingCommand:
        header = decode_header(UpdateGlobalWhiteAddrsConfigRequestHeader, request)
        return self._change(
            channel, request, ResponseCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED,
            lambda manager: manager.update_global_white_addrs_config(
                java_split(header.global_white_addrs, ","), header.acl_file_full_path),
            f"The globalWhiteAddresses[{_jstr(header.global_white_addrs)}] has been updated "
            "failed.")

    def get_broker_acl_config_version(self, channel: Channel,
                                      request: RemotingCommand) -> RemotingCommand | None:
        if self.validator is None:
            log.warning("acl.not_enabled", code=request.code, peer=channel.remote_addr)
            return None
        manager = self.validator.manager
        versions = manager.data_version_map
        all_versions = {path: {"counter": versions[path].counter,
                               "timestamp": versions[path].timestamp}
                        for path in java_hashmap_order(versions)}
        default = manager.data_version
        name, addr, cluster = self._identity()
        return request.create_response(ResponseCode.SUCCESS, ext_fields={
            "version": _json({"counter": default.counter, "timestamp": default.timestamp}),
            "allAclFileVersion": _json(all_versions),
            "brokerName": name, "brokerAddr": addr, "clusterName": cluster})

    def get_broker_cluster_acl_config(self, channel: Channel,
                                      request: RemotingCommand) -> RemotingCommand | None:
        if self.validator is None:
            log.warning("acl.not_enabled", code=request.code, peer=channel.remote_addr)
            return None
        whites, configs = self.validator.manager.all_acl_config()
        body = {"globalWhiteAddrs": whites,
                "plainAccessConfigs": [c.to_json() for c in configs]}
        return request.create_response(ResponseCode.SUCCESS, body=_json(body).encode("utf-8"))
