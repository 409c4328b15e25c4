"""The accounts of plain_acl.yml and the access check, as upstream ``PlainPermissionManager``.

Contract (acl/plain/PlainPermissionManager.java, 4.9.7):

* Files: with ``home`` (``rocketmq.home.dir`` / ``ROCKETMQ_HOME``) unset nothing loads, so
  every signed request is refused. Otherwise the default file is
  ``<home>/<rocketmq.acl.plain.file>`` (default ``conf/plain_acl.yml``, created empty when
  missing), plus every ``*.yml`` / ``*.yaml`` under ``<home>/conf/acl`` (recursively).
  An access key defined in two files belongs to the first file that defines it.
* A file holds ``globalWhiteRemoteAddresses`` (patterns, remote_address.py), ``accounts``
  (``accessKey``, ``secretKey``, ``whiteRemoteAddress``, ``admin``, ``defaultTopicPerm``,
  ``defaultGroupPerm``, ``topicPerms`` / ``groupPerms`` as ``name=PERM``) and
  ``dataVersion`` (``[{counter, timestamp}]``, bumped on every write by an admin command).
* Reload (``check_files``, polled by ``AclFileWatcher`` as upstream ``AclFileWatchService``):
  when the set of files changes, everything reloads; when one file's modification time
  changes, that file alone reloads (``load(aclFilePath)``): its accounts are replaced, while
  an access key removed from it stays known to the key table, so its requests then fail
  with "No PlainAccessResource for accessKey=..." exactly as upstream's do. A file that does
  not parse leaves the loaded state as it was (logged).
* ``validate(resource)``: global white list, then the access key, the account's own white
  list (which, as upstream, skips the signature and permission checks), the signature, the
  message-trace exception, then ``check_perm`` (admin-only codes, then each resource with
  its explicit or default permission, in Java ``HashMap`` order so the first refusal named is
  the stock broker's). Refusals raise ``AclError`` (errors.py).
* Admin edits (``update_access_config``, ``delete_access_config``,
  ``update_global_white_addrs_config``) rewrite the YAML file like upstream, including its
  quirks (a new white list takes effect when the watcher reloads the file; a deleted key is
  refused at once).

Divergence: the global white list is kept per file and recomputed on reload (upstream's
partial reload can leave a stale pattern behind when a file had none at full load).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.acl import Permission, PlainAccessConfig, cal_signature
from aiorocketmq.protocol.bodies import DataVersion
from aiorocketmq.protocol.codes import MixAll, SystemTopic
from aiorocketmq.protocol.javautil import java_hashmap_order
from aiorocketmq.protocol.request_specs import broker_specs

from .errors import AclError, Where
from .remote_address import RemoteAddressStrategy, remote_address_strategy

__all__ = [
    "ADMIN_CODES",
    "PlainAccessConfig",
    "PlainAccessResource",
    "PlainPermissionManager",
    "java_split",
]

log = get_logger("aiorocketmq.broker.acl")

RETRY_PREFIX = MixAll.RETRY_GROUP_TOPIC_PREFIX
ACCESS_KEY_MIN_LENGTH = 6
SECRET_KEY_MIN_LENGTH = 6

# Permission.ADMIN_CODE: the broker's request specs marked ``admin``.
ADMIN_CODES = frozenset(code for code, spec in broker_specs().items() if spec.admin)


def java_split(text: str | None, sep: str) -> list[str] | None:
    """``UtilAll.split`` (Java ``String.split``: trailing empty strings dropped)."""
    if text is None:
        return None
    parts = text.split(sep)
    while len(parts) > 1 and parts[-1] == "":
        parts.pop()
    return parts


def _split_drop_empty(text: str, sep: str) -> list[str]:
    return [t for t in text.split(sep) if t]


def retry_topic(group: str | None) -> str | None:
    return None if group is None else RETRY_PREFIX + group


def _text(value: Any) -> str | None:
    """A YAML scalar as fastjson's ``toJavaList`` gives a String field (``12345678`` -> "12345678")."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@dataclasses.dataclass(slots=True)
class PlainAccessResource:
    """``PlainAccessResource``: an account as loaded, or what one request needs."""

    access_key: str | None = None
    secret_key: str | None = dataclasses.field(default=None, repr=False)
    white_remote_address: str | None = None
    admin: bool = False
    default_topic_perm: int = Permission.DENY
    default_group_perm: int = Permission.DENY
    resource_perms: dict[str, int] | None = None
    remote_address_strategy: RemoteAddressStrategy | None = dataclasses.field(
        default=None, repr=False)
    request_code: int = 0
    content: bytes = dataclasses.field(default=b"", repr=False)
    signature: str | None = None
    secret_token: str | None = dataclasses.field(default=None, repr=False)

    def add_resource_and_perm(self, resource: str | None, perm: int) -> None:
        if resource is None:
            return
        if self.resource_perms is None:
            self.resource_perms = {}
        self.resource_perms[resource] = perm


def _account(obj: Any) -> PlainAccessConfig:
    try:
        return PlainAccessConfig.from_json(obj)
    except ValueError as exc:
        raise AclError(str(exc)) from exc


def print_resource(resource: str, is_group: bool) -> str:
    """``PlainAccessResource.printStr``."""
    if is_group:
        return f"group:{resource[len(RETRY_PREFIX):]}"
    return f"topic:{resource}"


def check_plain_access_config(config: PlainAccessConfig) -> None:
    ak, sk = config.access_key, config.secret_key
    if (ak is None or sk is None or len(ak) <= ACCESS_KEY_MIN_LENGTH
            or len(sk) <= SECRET_KEY_MIN_LENGTH):
        raise AclError(f"The accessKey={_jstr(ak)} and secretKey={_jstr(sk)} cannot be null "
                       "and length should longer than 6")


def check_resource_perms(resources: list[str] | None) -> None:
    """``Permission.checkResourcePerms``."""
    for resource in resources or ():
        items = _split_drop_empty(resource, "=")
        if len(items) != 2:
            raise AclError(f"Parse Resource format error for {resource}.\n"
                           "The expected resource format is 'Res=Perm'. For example: topicA=SUB")
        if not Permission.is_valid_spelling(items[1]):
            raise AclError(f"Parse resource permission error for {resource}.\n"
                           "The expected permissions are 'SUB' or 'PUB' or 'SUB|PUB' or 'PUB|SUB'.")


def _jstr(value: object) -> str:
    return "null" if value is None else str(value)


def build_plain_access_resource(config: PlainAccessConfig) -> PlainAccessResource:
    """``buildPlainAccessResource``: raises ``AclError`` for a bad account."""
    check_plain_access_config(config)
    res = PlainAccessResource(
        access_key=config.access_key, secret_key=config.secret_key,
        white_remote_address=config.white_remote_address, admin=config.admin,
        default_group_perm=Permission.parse(config.default_group_perm),
        default_topic_perm=Permission.parse(config.default_topic_perm))
    for is_topic, entries in ((False, config.group_perms), (True, config.topic_perms)):
        for entry in entries or ():
            items = _split_drop_empty(entry, "=")
            if len(items) != 2:
                kind = "topic" if is_topic else "group"
                raise AclError(f"Parse resource permission failed for {kind}:{entry}")
            name = items[0].strip()
            res.add_resource_and_perm(name if is_topic else retry_topic(name),
                                      Permission.parse(items[1].strip()))
    res.remote_address_strategy = remote_address_strategy(config.white_remote_address)
    return res


def deal_file_path(path: str) -> str:
    """``MixAll.dealFilePath`` (``Paths.normalize``; repeated slashes collapse)."""
    collapsed = "/".join(p for p in path.split("/") if p) if path.startswith("/") else path
    if path.startswith("/"):
        collapsed = "/" + collapsed
    return os.path.normpath(collapsed)


def read_yaml(path: str) -> Any:
    """``AclUtils.getYamlDataObject``: None for a missing file, ``AclError`` for bad YAML."""
    try:
        with open(path, encoding="utf-8") as fh:
            return yaml.safe_load(fh)
    except FileNotFoundError:
        return None
    except (OSError, yaml.YAMLError) as exc:
        raise AclError(str(exc)) from exc


def write_yaml(path: str, data: dict[str, Any]) -> bool:
    """``AclUtils.writeDataObject`` (block style, as SnakeYAML's ``dumpAsMap``)."""
    text = yaml.safe_dump(data, default_flow_style=False, sort_keys=False, allow_unicode=True)
    try:
        tmp = f"{path}.tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except OSError as exc:
        raise AclError(str(exc)) from exc
    return True


def _read_acl_file(path: str) -> dict[str, Any] | None:
    """The mapping an ACL file holds; None (logged) when it is empty. Raises ``AclError``."""
    data = read_yaml(path)
    if not data:
        log.warning("acl.file_empty", path=path)
        return None
    if not isinstance(data, dict):
        raise AclError(f"{path}: not a YAML mapping")
    return data


def _global_white(data: dict[str, Any]) -> list[RemoteAddressStrategy]:
    """The strategies of a file's ``globalWhiteRemoteAddresses``."""
    return [remote_address_strategy(_text(p)) for p in data.get("globalWhiteRemoteAddresses") or ()]


def _file_state(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


@dataclasses.dataclass(slots=True)
class _State:
    resources: dict[str, dict[str, PlainAccessResource]]  # file -> access key -> account
    key_table: dict[str, str]  # access key -> file
    global_white: dict[str, list[RemoteAddressStrategy]]  # file -> patterns
    data_versions: dict[str, DataVersion]


class PlainPermissionManager:
    """Loaded plain ACL files and the checks (module docstring)."""

    def __init__(self, home: str | None, plain_file: str | None = None) -> None:
        self.home = home
        rel = plain_file or "conf/plain_acl.yml"
        self.default_acl_dir = deal_file_path(f"{home}/conf/acl")
        self.default_acl_file = deal_file_path(f"{home}/{rel}")
        self.file_list: list[str] = []
        self.data_version = DataVersion()  # @Deprecated dataVersion: the default file's
        self._state = _State({}, {}, {}, {})
        self._global_white: list[RemoteAddressStrategy] = []
        self._watched: dict[str, tuple[int, int] | None] = {}
        self.load()

    # -- files ----------------------------------------------------------------------------

    def all_acl_files(self, path: str) -> list[str]:
        """``getAllAclFiles``: YAML files under ``path``, recursively (tools.yml left out)."""
        if not os.path.exists(path):
            return []
        found: list[str] = []
        tools = deal_file_path(f"{self.home}/conf/tools.yml")
        for name in sorted(os.listdir(path)):
            full = os.path.join(path, name)
            if full == tools:
                continue
            if name.endswith((".yml", ".yaml")):
                found.append(full)
            elif os.path.isdir(full):
                found.extend(self.all_acl_files(full))
        return found

    def _current_files(self) -> list[str]:
        files = self.all_acl_files(self.default_acl_dir)
        if os.path.exists(self.default_acl_file) and self.default_acl_file not in files:
            files.append(self.default_acl_file)
        return files

    def load(self) -> None:
        """Full load of every ACL file (upstream ``load()``). Raises ``AclError``."""
        if not self.home:
            return
        if not os.path.exists(self.default_acl_file):
            try:
                Path(self.default_acl_file).parent.mkdir(parents=True, exist_ok=True)
                Path(self.default_acl_file).touch()
            except OSError as exc:
                raise AclError(str(exc)) from exc
        files = self._current_files()
        state = _State({}, {}, {}, {})
        for path in files:
            path = deal_file_path(path)
            data = _read_acl_file(path)
            if data is None:
                continue
            whites = _global_white(data)
            if whites:
                state.global_white[path] = whites
            accounts: dict[str, PlainAccessResource] = {}
            for obj in data.get("accounts") or ():
                res = build_plain_access_resource(_account(obj))
                assert res.access_key is not None
                if res.access_key not in state.key_table:
                    accounts[res.access_key] = res
                    state.key_table[res.access_key] = path
                else:
                    log.warning("acl.access_key_repeated", access_key=res.access_key, path=path)
            if accounts:
                state.resources[path] = accounts
            state.data_versions[path] = _data_version(data)
        if self.default_acl_file in state.data_versions:
            self.data_version.assign_new_one(state.data_versions[self.default_acl_file])
        self.file_list = files
        self._state = state
        self._global_white = [s for ws in state.global_white.values() for s in ws]
        self._watched = {f: _file_state(f) for f in files}
        log.info("acl.loaded", files=files, accounts=len(state.key_table))

    def load_file(self, path: str) -> None:
        """Reload one changed file (upstream ``load(aclFilePath)``). Raises ``AclError``."""
        path = deal_file_path(path)
        data = _read_acl_file(path)
        if data is None:
            return
        whites = _global_white(data)
        state = self._state
        accounts: dict[str, PlainAccessResource] = {}
        built = [build_plain_access_resource(_account(obj))
                 for obj in data.get("accounts") or ()]
        for res in built:
            assert res.access_key is not None
            old = state.key_table.get(res.access_key)
            if old is None or old == path:
                accounts[res.access_key] = res
                state.key_table[res.access_key] = path
        state.global_white[path] = whites
        state.resources[path] = accounts
        version = _data_version(data)
        state.data_versions[path] = version
        if path == self.default_acl_file:
            self.data_version.assign_new_one(version)
        self._global_white = [s for ws in state.global_white.values() for s in ws]
        log.info("acl.file_reloaded", path=path, accounts=len(accounts))

    def check_files(self) -> None:
        """One pass of upstream ``AclFileWatchService``: reload what changed.

        Errors (a file that does not parse) are logged; the loaded state stays.
        """
        if not self.home:
            return
        files = self._current_files()
        try:
            if len(files) != len(self._watched):
                log.info("acl.files_changed", before=len(self._watched), now=len(files))
                self.load()
                return
            for path in files:
                now = _file_state(path)
                if now != self._watched.get(path):
                    self._watched[path] = now
                    self.load_file(path)
        except AclError as exc:
            log.error("acl.reload_failed", error=str(exc))

    # -- checks ---------------------------------------------------------------------------

    def validate(self, res: PlainAccessResource) -> None:
        """Refuse ``res`` with ``AclError`` unless it may pass (module docstring)."""
        addr = res.white_remote_address
        for match in self._global_white:
            if match(addr):
                return
        ak = res.access_key
        if ak is None:
            raise AclError("No accessKey is configured", Where.VALIDATE_NO_ACCESS_KEY)
        state = self._state
        path = state.key_table.get(ak)
        if path is None:
            raise AclError(f"No acl config for {ak}", Where.VALIDATE_NO_ACL_CONFIG)
        owned = state.resources.get(path, {}).get(ak)
        if owned is None:
            raise AclError(f"No PlainAccessResource for accessKey={ak}",
                           Where.VALIDATE_NO_RESOURCE)
        assert owned.remote_address_strategy is not None
        if owned.remote_address_strategy(addr):
            return
        assert owned.secret_key is not None
        if cal_signature(res.content, owned.secret_key) != res.signature:
            raise AclError(f"Check signature failed for accessKey={ak}", Where.VALIDATE_SIGNATURE)
        perms = res.resource_perms
        if perms is not None and perms.get(SystemTopic.TRACE_TOPIC) == Permission.PUB:
            return
        self.check_perm(res, owned)

    @staticmethod
    def check_perm(needed: PlainAccessResource, owned: PlainAccessResource) -> None:
        if needed.request_code in ADMIN_CODES and not owned.admin:
            raise AclError(f"Need admin permission for request code={needed.request_code}, "
                           f"but accessKey={owned.access_key} is not", Where.CHECK_ADMIN)
        wanted = needed.resource_perms
        if wanted is None:
            return
        have = owned.resource_perms
        if have is None and owned.admin:
            return
        for resource in java_hashmap_order(wanted):
            perm = wanted[resource]
            is_group = resource.startswith(RETRY_PREFIX)
            if have is None or resource not in have:
                default = owned.default_group_perm if is_group else owned.default_topic_perm
                if not Permission.check(perm, default):
                    raise AclError(f"No default permission for {print_resource(resource, is_group)}",
                                   Where.CHECK_DEFAULT_PERM)
                continue
            if not Permission.check(perm, have[resource]):
                raise AclError(f"No default permission for {print_resource(resource, is_group)}",
                               Where.CHECK_RESOURCE_PERM)

    # -- admin edits ----------------------------------------------------------------------

    def update_access_config(self, config: PlainAccessConfig) -> bool:
        """``updateAccessConfig``: create or update one account in its file."""
        check_plain_access_config(config)
        check_resource_perms(config.topic_perms)
        check_resource_perms(config.group_perms)
        ak = config.access_key
        assert ak is not None
        state = self._state
        path = state.key_table.get(ak)
        if path is not None:
            data = read_yaml(path)
            if not isinstance(data, dict):
                data = {}
            accounts = data.get("accounts")
            if accounts is not None:
                for account in list(accounts):
                    if isinstance(account, dict) and _text(account.get("accessKey")) == ak:
                        accounts.remove(account)
                        accounts.append(_account_map(account, config))
                        break
            else:
                data["accounts"] = [_account_map(None, config)]
            state.resources.setdefault(path, {})[ak] = build_plain_access_resource(config)
            return write_yaml(path, self._next_file_version(path, data))
        path = self.default_acl_file
        if not os.path.exists(path):
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            Path(path).touch()
        data = read_yaml(path)
        if not isinstance(data, dict):
            data = {"accounts": []}
        accounts = data.get("accounts")
        if accounts is None:
            accounts = []
        accounts.append(_account_map(None, config))
        data["accounts"] = accounts
        state.key_table[ak] = path
        state.resources.setdefault(path, {})[ak] = build_plain_access_resource(config)
        return write_yaml(path, self._next_file_version(path, data))

    def delete_access_config(self, access_key: str | None) -> bool:
        """``deleteAccessConfig``: False when the key is unknown."""
        if not access_key:
            return False
        path = self._state.key_table.get(access_key)
        if path is None:
            return False
        data = read_yaml(path)
        if not data:
            log.warning("acl.delete_no_data", path=path, access_key=access_key)
            return True
        accounts = data.get("accounts")
        if accounts is None:  # upstream: a NullPointerException, answered with remark null
            raise AclError(None)
        for account in list(accounts):
            if isinstance(account, dict) and _text(account.get("accessKey")) == access_key:
                accounts.remove(account)
                del self._state.key_table[access_key]
                data["accounts"] = accounts
                return write_yaml(path, self._next_file_version(path, data))
        return False

    def update_global_white_addrs_config(self, addrs: list[str] | None,
                                         file_name: str | None = None) -> bool:
        """``updateGlobalWhiteAddrsConfig``: False for a file it will not touch."""
        if not file_name:
            file_name = self.default_acl_file
        if addrs is None:
            return False
        if not os.path.exists(file_name) or os.path.isdir(file_name):
            log.error("acl.white_file_missing", path=file_name)
            return False
        if not self.home or not file_name.startswith(self.home):
            log.error("acl.white_file_outside_home", path=file_name, home=self.home)
            return False
        # Upstream's test reads `!endsWith(".yml") && endsWith(".yaml")`: only .yaml is refused.
        if not file_name.endswith(".yml") and file_name.endswith(".yaml"):
            return False
        data = read_yaml(file_name)
        if not isinstance(data, dict):
            data = {}
        data["globalWhiteRemoteAddresses"] = list(addrs)
        return write_yaml(file_name, self._next_file_version(file_name, data))

    def _next_file_version(self, path: str, data: dict[str, Any]) -> dict[str, Any]:
        """``updateAclConfigFileVersion``: bump the file's dataVersion."""
        version = DataVersion(counter=0)
        items = data.get("dataVersion")
        if isinstance(items, list) and items and isinstance(items[0], dict):
            version.timestamp = int(items[0].get("timestamp", version.timestamp))
            version.counter = int(items[0].get("counter", 0))
        version.next_version()
        data["dataVersion"] = [{"counter": version.counter, "timestamp": version.timestamp}]
        self._state.data_versions[path] = version
        return data

    # -- reports --------------------------------------------------------------------------

    def all_acl_config(self) -> tuple[list[str], list[PlainAccessConfig]]:
        """``getAllAclConfig``: (global white patterns, accounts) read from the files."""
        whites: list[str] = []
        configs: list[PlainAccessConfig] = []
        seen: set[str | None] = set()
        for path in self.file_list:
            data = read_yaml(path)
            if not isinstance(data, dict) or not data:
                continue
            whites.extend(_text(p) or "" for p in data.get("globalWhiteRemoteAddresses") or ())
            for obj in data.get("accounts") or ():
                config = _account(obj)
                if config.access_key not in seen:
                    seen.add(config.access_key)
                    configs.append(config)
        return whites, configs

    @property
    def data_version_map(self) -> dict[str, DataVersion]:
        return dict(self._state.data_versions)

    @property
    def access_keys(self) -> Iterable[str]:
        return self._state.key_table.keys()


def _data_version(data: dict[str, Any]) -> DataVersion:
    version = DataVersion()
    items = data.get("dataVersion")
    if isinstance(items, list) and items and isinstance(items[0], dict):
        version.timestamp = int(items[0].get("timestamp", version.timestamp))
        version.counter = int(items[0].get("counter", 0))
    return version


def _account_map(existing: dict[str, Any] | None, config: PlainAccessConfig) -> dict[str, Any]:
    """``createAclAccessConfigMap``: the YAML mapping of one account."""
    account: dict[str, Any] = existing if existing is not None else {}
    ak = config.access_key
    if not ak or len(ak) <= ACCESS_KEY_MIN_LENGTH:
        raise AclError(f"The accessKey={_jstr(ak)} cannot be null and length should longer than 6")
    account["accessKey"] = ak
    if config.secret_key:
        if len(config.secret_key) <= SECRET_KEY_MIN_LENGTH:
            raise AclError(f"The secretKey={config.secret_key} value length should longer than 6")
        account["secretKey"] = config.secret_key
    if config.white_remote_address is not None:
        account["whiteRemoteAddress"] = config.white_remote_address
    account["admin"] = config.admin
    if config.default_topic_perm:
        account["defaultTopicPerm"] = config.default_topic_perm
    if config.default_group_perm:
        account["defaultGroupPerm"] = config.default_group_perm
    if config.topic_perms is not None:
        account["topicPerms"] = config.topic_perms
    if config.group_perms is not None:
        account["groupPerms"] = config.group_perms
    return account
