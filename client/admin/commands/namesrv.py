"""Nameserver commands (upstream ``tools/command/namesrv``): updateKvConfig, deleteKvConfig,
getKvConfig, getNamesrvConfig, updateNamesrvConfig, wipeWritePerm, addWritePerm."""

# UP031: %-formatting on purpose, so each table reads like the upstream printf it mirrors.
# ruff: noqa: UP031

from __future__ import annotations

import argparse
import sys

from aiorocketmq.protocol.errors import MQClientError, RocketMQError

from ..api import MQAdmin
from .base import Output, command, opt
from .formatting import describe_error, format_properties


@command("updateKvConfig", "Create or update KV config",
         opt("-s", "--namespace", required=True),
         opt("-k", "--key", required=True),
         opt("-v", "--value", required=True))
async def update_kv_config(admin: MQAdmin, args: argparse.Namespace) -> Output:
    await admin.put_kv_config(args.namespace, args.key, args.value)
    return Output({"namespace": args.namespace, "key": args.key, "value": args.value},
                  "create or update kv config to namespace success.\n")


@command("deleteKvConfig", "Delete KV config",
         opt("-s", "--namespace", required=True),
         opt("-k", "--key", required=True))
async def delete_kv_config(admin: MQAdmin, args: argparse.Namespace) -> Output:
    await admin.delete_kv_config(args.namespace, args.key)
    return Output({"namespace": args.namespace, "key": args.key},
                  "delete kv config from namespace success.\n")


@command("getKvConfig", "Get a KV config value or a whole namespace",
         opt("-s", "--namespace", required=True),
         opt("-k", "--key"))
async def get_kv_config(admin: MQAdmin, args: argparse.Namespace) -> Output:
    if args.key:
        value = await admin.get_kv_config(args.namespace, args.key)
        if value is None:
            raise MQClientError(f"key '{args.key}' not found in namespace '{args.namespace}'")
        table = {args.key: value}
    else:
        table = await admin.get_kv_list(args.namespace)
    return Output({"namespace": args.namespace, "table": table},
                  "".join("%-50s=  %s\n" % (k, table[k]) for k in sorted(table)))


@command("getNamesrvConfig", "Get configs of name server")
async def get_namesrv_config(admin: MQAdmin, args: argparse.Namespace) -> Output:
    configs = await admin.get_namesrv_config()
    return Output(configs, "".join(format_properties(a, p) for a, p in configs.items()))


@command("updateNamesrvConfig", "Update configs of name server",
         opt("-k", "--key", required=True),
         opt("-v", "--value", required=True))
async def update_namesrv_config(admin: MQAdmin, args: argparse.Namespace) -> Output:
    await admin.update_namesrv_config({args.key: args.value})
    text = "update name server config success!%s\n%s : %s\n" % (
        admin.namesrv_addrs, args.key, args.value)
    return Output({"namesrv": admin.namesrv_addrs, "key": args.key, "value": args.value}, text)


async def _write_perm(admin: MQAdmin, args: argparse.Namespace, verb: str) -> Output:
    """``WipeWritePermSubCommand`` / ``AddWritePermSubCommand``: every nameserver of ``-n`` in
    turn; one that fails gets a ``Failed`` line (the reason on stderr) and the rest go on."""
    broker = args.brokerName.strip()
    call = admin.wipe_write_perm if verb == "wipe" else admin.add_write_perm
    lines: list[str] = []
    counts: dict[str, int | None] = {}
    for addr in admin.namesrv_addrs:
        try:
            counts[addr] = count = await call(addr, broker)
        except (RocketMQError, OSError, TimeoutError) as exc:
            counts[addr] = None
            lines.append("%s write perm of broker[%s] in name server[%s] Failed\n"
                         % (verb, broker, addr))
            print(describe_error(exc), file=sys.stderr)
            continue
        lines.append("%s write perm of broker[%s] in name server[%s] OK, %d\n"
                     % (verb, broker, addr, count))
    return Output({"brokerName": broker, "topicCounts": counts}, "".join(lines))


@command("wipeWritePerm", "Wipe write perm of broker in all name server you defined in the -n param",
         opt("-b", "--brokerName", required=True, help="broker name"))
async def wipe_write_perm(admin: MQAdmin, args: argparse.Namespace) -> Output:
    return await _write_perm(admin, args, "wipe")


@command("addWritePerm", "Add write perm of broker in all name server you defined in the -n param",
         opt("-b", "--brokerName", required=True, help="broker name"))
async def add_write_perm(admin: MQAdmin, args: argparse.Namespace) -> Output:
    return await _write_perm(admin, args, "add")
