"""ACL admin calls of ``MQAdmin`` (upstream ``MQClientAPIImpl`` / ``DefaultMQAdminExt``, 4.9.7).

* ``update_acl_config(admin, addr, config)``: UPDATE_AND_CREATE_ACL_CONFIG (50), the header
  is ``CreateAccessConfigRequestHeader`` (null fields left out, lists joined with ``,``).
* ``delete_acl_config(admin, addr, access_key)``: DELETE_ACL_CONFIG (51).
* ``update_global_white_addr_config(admin, addr, addrs, acl_file_full_path)``:
  UPDATE_GLOBAL_WHITE_ADDRS_CONFIG (53).
* ``acl_version_info(admin, addr)``: GET_BROKER_CLUSTER_ACL_INFO (52) -> ``ClusterAclVersionInfo``.
* ``broker_acl_config(admin, addr)``: GET_BROKER_CLUSTER_ACL_CONFIG (54, a 4.9.7 code) ->
  (global white addresses, accounts).
* ``tools_rpc_hook(home)``: what stock ``MQAdminStartup`` signs with,
  ``AclUtils.getAclRPCHook(<rocketmq home>/conf/tools.yml)``: its ``accessKey`` and
  ``secretKey``, or None when the file or either key is missing.

A refusal raises ``MQBrokerError`` with the broker's code and remark.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any

import yaml

from aiorocketmq.protocol.acl import AclClientRPCHook, PlainAccessConfig, SessionCredentials
from aiorocketmq.protocol.bodies import DataVersion
from aiorocketmq.protocol.codes import RequestCode
from aiorocketmq.protocol.command import RemotingCommand
from aiorocketmq.protocol.errors import MQBrokerError

from .api import MQAdmin

__all__ = [
    "ClusterAclVersionInfo",
    "acl_version_info",
    "broker_acl_config",
    "delete_acl_config",
    "tools_rpc_hook",
    "update_acl_config",
    "update_global_white_addr_config",
]


@dataclasses.dataclass(slots=True)
class ClusterAclVersionInfo:
    """``ClusterAclVersionInfo``: one broker's ACL file versions."""

    broker_name: str
    broker_addr: str
    cluster_name: str
    acl_config_data_version: DataVersion
    all_acl_config_data_version: dict[str, DataVersion]


async def update_acl_config(admin: MQAdmin, addr: str, config: PlainAccessConfig) -> None:
    ext: dict[str, str] = {"admin": "true" if config.admin else "false"}
    for key, value in (("accessKey", config.access_key), ("secretKey", config.secret_key),
                       ("defaultGroupPerm", config.default_group_perm),
                       ("defaultTopicPerm", config.default_topic_perm),
                       ("whiteRemoteAddress", config.white_remote_address),
                       ("topicPerms", None if config.topic_perms is None
                        else ",".join(config.topic_perms)),
                       ("groupPerms", None if config.group_perms is None
                        else ",".join(config.group_perms))):
        if value is not None:
            ext[key] = value
    await _invoke(admin, addr, RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, ext)


async def delete_acl_config(admin: MQAdmin, addr: str, access_key: str) -> None:
    await _invoke(admin, addr, RequestCode.DELETE_ACL_CONFIG, {"accessKey": access_key})


async def update_global_white_addr_config(admin: MQAdmin, addr: str, addrs: str,
                                          acl_file_full_path: str | None = None) -> None:
    ext = {"globalWhiteAddrs": addrs}
    if acl_file_full_path is not None:
        ext["aclFileFullPath"] = acl_file_full_path
    await _invoke(admin, addr, RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, ext)


async def acl_version_info(admin: MQAdmin, addr: str) -> ClusterAclVersionInfo:
    response = await _invoke(admin, addr, RequestCode.GET_BROKER_CLUSTER_ACL_INFO, None)
    ext = response.ext_fields or {}
    versions = json.loads(ext.get("allAclFileVersion") or "{}")
    return ClusterAclVersionInfo(
        broker_name=ext.get("brokerName", ""), broker_addr=ext.get("brokerAddr", ""),
        cluster_name=ext.get("clusterName", ""),
        acl_config_data_version=DataVersion.from_json(json.loads(ext.get("version") or "{}")),
        all_acl_config_data_version={k: DataVersion.from_json(v) for k, v in versions.items()})


async def broker_acl_config(admin: MQAdmin, addr: str) -> tuple[list[str], list[PlainAccessConfig]]:
    response = await _invoke(admin, addr, RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG, None)
    body: dict[str, Any] = json.loads(bytes(response.body or b"{}"))
    return (list(body.get("globalWhiteAddrs") or []),
            [PlainAccessConfig.from_json(c) for c in body.get("plainAccessConfigs") or []])


async def _invoke(admin: MQAdmin, addr: str, code: int,
                  ext: dict[str, str] | None) -> RemotingCommand:
    request = RemotingCommand.create_request(code, ext)
    response = await admin.remoting.invoke(addr, request, admin.timeout)
    if response.code != 0:
        raise MQBrokerError.for_code(response.code, response.remark, addr)
    return response


def tools_rpc_hook(home: str | None = None) -> AclClientRPCHook | None:
    """``AclUtils.getAclRPCHook(home + "/conf/tools.yml")`` (module docstring); ``home``
    defaults to the ``ROCKETMQ_HOME`` environment variable."""
    home = home if home is not None else os.environ.get("ROCKETMQ_HOME")
    path = f"{home}/conf/tools.yml"
    try:
        with open(path, encoding="utf-8") as fh:
            data = yaml.safe_load(fh)
    except (OSError, yaml.YAMLError):
        return None
    if not isinstance(data, dict):
        return None
    ak, sk = data.get("accessKey"), data.get("secretKey")
    if ak is None or sk is None or not str(ak).strip() or not str(sk).strip():
        return None
    return AclClientRPCHook(SessionCredentials(str(ak), str(sk)))
