"""ACL commands (upstream ``tools/command/acl``): updateAclConfig, deleteAclConfig
(alias deleteAccessConfig), clusterAclConfigVersion, updateGlobalWhiteAddr, getAclConfig
(alias getAccessConfigSubCommand)."""

# UP031: %-formatting on purpose, so each table reads like the upstream printf it mirrors.
# ruff: noqa: UP031

from __future__ import annotations

import argparse
from typing import Any

from aiorocketmq.protocol.acl import PlainAccessConfig
from aiorocketmq.protocol.javautil import java_hashmap_order

from .. import acl as acl_admin
from ..api import MQAdmin
from .base import BROKER_OR_CLUSTER, Output, command, opt
from .formatting import format_date, java_list


async def _acl_targets(admin: MQAdmin, args: argparse.Namespace, *, masters_only: bool) -> list[str]:
    """``-b`` the one broker; ``-c`` the cluster's masters (and slaves, for the commands that
    write: upstream ``fetchMasterAndSlaveAddrByClusterName``)."""
    if args.brokerAddr:
        return [args.brokerAddr.strip()]
    return [b.addr for b in await admin.brokers(args.clusterName.strip(),
                                                masters_only=masters_only)]


def _acl_perm_list(text: str | None) -> list[str] | None:
    return None if text is None else text.strip().split(",")


@command("updateAclConfig", "Update acl config yaml file in broker",
         BROKER_OR_CLUSTER,
         opt("-a", "--accessKey", required=True, help="set accessKey in acl config file"),
         opt("-s", "--secretKey", required=True, help="set secretKey in acl config file"),
         opt("-w", "--whiteRemoteAddress",
             help="set white ip Address for account in acl config file"),
         opt("-i", "--defaultTopicPerm", help="set default topicPerm in acl config file"),
         opt("-u", "--defaultGroupPerm", help="set default GroupPerm in acl config file"),
         opt("-t", "--topicPerms", help="set topicPerms list,eg: topicA=DENY,topicD=SUB"),
         opt("-g", "--groupPerms", help="set groupPerms list,eg: groupD=DENY,groupD=SUB"),
         opt("-m", "--admin", help="set admin flag in acl config file"))
async def update_acl_config(admin: MQAdmin, args: argparse.Namespace) -> Output:
    config = PlainAccessConfig(
        access_key=args.accessKey.strip(), secret_key=args.secretKey.strip(),
        white_remote_address=None if args.whiteRemoteAddress is None
        else args.whiteRemoteAddress.strip(),
        admin=args.admin is not None and args.admin.strip().lower() == "true",
        default_topic_perm=None if args.defaultTopicPerm is None else args.defaultTopicPerm.strip(),
        default_group_perm=None if args.defaultGroupPerm is None else args.defaultGroupPerm.strip(),
        topic_perms=_acl_perm_list(args.topicPerms), group_perms=_acl_perm_list(args.groupPerms))
    lines = []
    for addr in await _acl_targets(admin, args, masters_only=False):
        await acl_admin.update_acl_config(admin, addr, config)
        lines.append("create or update plain access config to %s success.\n" % addr)
    lines.append("%r" % config)
    return Output({"accessKey": config.access_key, "brokers": len(lines) - 1}, "".join(lines))


@command("deleteAclConfig", "Delete Acl Config Account in broker",
         BROKER_OR_CLUSTER,
         opt("-a", "--accessKey", required=True,
             help="set accessKey in acl config file for deleting which account"),
         aliases=("deleteAccessConfig",))
async def delete_acl_config(admin: MQAdmin, args: argparse.Namespace) -> Output:
    ak = args.accessKey.strip()
    lines = []
    for addr in await _acl_targets(admin, args, masters_only=False):
        await acl_admin.delete_acl_config(admin, addr, ak)
        lines.append("delete plain access config account from %s success.\n" % addr)
    lines.append("account's accesskey is:%s" % ak)
    return Output({"accessKey": ak}, "".join(lines))


@command("clusterAclConfigVersion", "List all of acl config version information in cluster",
         BROKER_OR_CLUSTER)
async def cluster_acl_config_version(admin: MQAdmin, args: argparse.Namespace) -> Output:
    rows: list[dict[str, Any]] = []
    text = []
    if args.clusterName:
        text.append("%-16s  %-22s  %-22s  %-20s  %-22s  %-22s\n" % (
            "#Cluster Name", "#Broker Name", "#Broker Addr", "#AclFilePath",
            "#AclConfigVersionNum", "#AclLastUpdateTime"))
    for addr in await _acl_targets(admin, args, masters_only=True):
        info = await acl_admin.acl_version_info(admin, addr)
        for path in java_hashmap_order(info.all_acl_config_data_version):
            v = info.all_acl_config_data_version[path]
            rows.append({"clusterName": info.cluster_name, "brokerName": info.broker_name,
                         "brokerAddr": info.broker_addr, "aclFilePath": path,
                         "counter": v.counter, "timestamp": v.timestamp})
            text.append("%-16s  %-22s  %-22s  %-20s  %-22s  %-22s\n" % (
                info.cluster_name, info.broker_name, info.broker_addr, path, v.counter,
                format_date(v.timestamp)))
    text.append("get cluster's plain access config version success.\n" if args.clusterName
                else "get broker's plain access config version success.\n")
    return Output(rows, "".join(text))


@command("updateGlobalWhiteAddr", "Update global white address for acl Config File in broker",
         BROKER_OR_CLUSTER,
         opt("-g", "--globalWhiteRemoteAddresses", required=True,
             help="set globalWhiteRemoteAddress list,eg: 10.10.103.*,192.168.0.*"),
         opt("-p", "--aclFileFullPath",
             help="update global white address of specified acl file,eg: /xxx/plain_test.yml"))
async def update_global_white_addr(admin: MQAdmin, args: argparse.Namespace) -> Output:
    addrs = args.globalWhiteRemoteAddresses.strip()
    path = None if args.aclFileFullPath is None else args.aclFileFullPath.strip()
    lines = []
    for addr in await _acl_targets(admin, args, masters_only=False):
        await acl_admin.update_global_white_addr_config(admin, addr, addrs, path)
        lines.append("update global white remote addresses to %s success.\n" % addr)
    return Output({"globalWhiteRemoteAddresses": addrs.split(",")}, "".join(lines))


@command("getAclConfig", "List all of acl config information in cluster",
         BROKER_OR_CLUSTER,
         aliases=("getAccessConfigSubCommand",))
async def get_acl_config(admin: MQAdmin, args: argparse.Namespace) -> Output:
    data = []
    text = []
    for addr in await _acl_targets(admin, args, masters_only=True):
        whites, configs = await acl_admin.broker_acl_config(admin, addr)
        data.append({"brokerAddr": addr, "globalWhiteAddrs": whites,
                     "plainAccessConfigs": [c.to_json() for c in configs]})
        text.append("\n%-20s: %s\n\naccounts:\n" % ("globalWhiteRemoteAddresses",
                                                     java_list(whites)))
        for c in configs:
            # PlainAccessConfig's declared fields, in order (GetAccessConfigSubCommand)
            for name, value in (("accessKey", c.access_key), ("secretKey", c.secret_key),
                                ("whiteRemoteAddress", c.white_remote_address),
                                ("admin", "true" if c.admin else "false"),
                                ("defaultTopicPerm", c.default_topic_perm),
                                ("defaultGroupPerm", c.default_group_perm),
                                ("topicPerms", None if c.topic_perms is None
                                 else java_list(c.topic_perms)),
                                ("groupPerms", None if c.group_perms is None
                                 else java_list(c.group_perms))):
                text.append("%-1s %-18s: %s\n" % ("", name, "" if value is None else value))
            text.append("\n")
    return Output(data, "".join(text))
