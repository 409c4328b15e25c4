"""Broker access control, ACL 1.0 (upstream ``acl/plain``), enabled by ``aclEnable=true``.

* ``errors.py``: ``AclError`` and the stock broker's refusal remark.
* ``remote_address.py``: white-list patterns (``RemoteAddressStrategyFactory``).
* ``plain_permission.py``: plain_acl.yml files, accounts, the check (``PlainPermissionManager``).
* ``validator.py``: what each request code needs and the server hook (``PlainAccessValidator``).
* ``watcher.py``: reload on file change (``AclFileWatchService``).
* ``processor.py``: the five ACL admin request codes (``AdminBrokerProcessor`` ACL part).

``load_access_validator(home, system_properties)`` builds the validator as
``BrokerController.initialAcl`` does (the request signing itself lives in protocol/acl.py).
"""

from __future__ import annotations

from .errors import AclError
from .plain_permission import PlainAccessConfig, PlainPermissionManager
from .validator import PlainAccessValidator, rocketmq_home
from .watcher import AclFileWatcher

__all__ = [
    "AclError",
    "AclFileWatcher",
    "PlainAccessConfig",
    "PlainAccessValidator",
    "PlainPermissionManager",
    "load_access_validator",
    "rocketmq_home",
]


def load_access_validator(system_properties: dict[str, str] | None = None) -> PlainAccessValidator:
    """The broker's validator: home from ``rocketmq.home.dir`` / ``ROCKETMQ_HOME``, file from
    ``rocketmq.acl.plain.file`` (relative to home). Raises ``AclError`` for a bad file."""
    props = system_properties or {}
    manager = PlainPermissionManager(rocketmq_home(props), props.get("rocketmq.acl.plain.file"))
    return PlainAccessValidator(manager)
