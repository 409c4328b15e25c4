"""``AclError``: upstream ``AclException``, and the remark a refused request gets.

A refused request is answered as upstream's ``NettyRemotingAbstract.processRequestCommand``
answers any exception from an RPC hook: ``SYSTEM_ERROR`` with
``RemotingHelper.exceptionSimpleDesc(e)``, i.e. ``e.toString()`` (the class name, then
``": " + message`` when there is one), ``", "`` and the top stack frame. The frame is where
4.9.7 raises that exception (class, method, file and line of
``acl/src/main/java/org/apache/rocketmq/acl/plain/*.java`` at tag rocketmq-all-4.9.7), so our
remark is byte for byte the stock broker's.
"""

from __future__ import annotations

__all__ = ["AclError", "Where"]

_CLASS = "org.apache.rocketmq.acl.common.AclException"
_PLAIN = "org.apache.rocketmq.acl.plain."


class Where:
    """Top stack frames of the 4.9.7 throw sites, as ``StackTraceElement.toString()``."""

    VALIDATE_NO_ACCESS_KEY = f"{_PLAIN}PlainPermissionManager.validate(PlainPermissionManager.java:663)"
    VALIDATE_NO_ACL_CONFIG = f"{_PLAIN}PlainPermissionManager.validate(PlainPermissionManager.java:667)"
    VALIDATE_NO_RESOURCE = f"{_PLAIN}PlainPermissionManager.validate(PlainPermissionManager.java:674)"
    VALIDATE_SIGNATURE = f"{_PLAIN}PlainPermissionManager.validate(PlainPermissionManager.java:683)"
    CHECK_ADMIN = f"{_PLAIN}PlainPermissionManager.checkPerm(PlainPermissionManager.java:580)"
    CHECK_DEFAULT_PERM = f"{_PLAIN}PlainPermissionManager.checkPerm(PlainPermissionManager.java:605)"
    CHECK_RESOURCE_PERM = f"{_PLAIN}PlainPermissionManager.checkPerm(PlainPermissionManager.java:610)"
    PARSE = f"{_PLAIN}PlainAccessValidator.parse(PlainAccessValidator.java:134)"


class AclError(Exception):
    """An access-control refusal or a bad ACL configuration (upstream ``AclException``).

    ``str(err)`` is the message; ``err.remark`` is what the stock broker puts in the
    response (module docstring).
    """

    def __init__(self, message: str | None, where: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.where = where

    def __str__(self) -> str:
        return self.message or ""

    @property
    def remark(self) -> str:
        text = _CLASS if self.message is None else f"{_CLASS}: {self.message}"
        return text if self.where is None else f"{text}, {self.where}"
