"""ACL 2.0's admin requests (Java 5.3.3 ``AdminBrokerProcessor``: AUTH_CREATE_USER 3001 ..
AUTH_LIST_ACL 3010): users and ACLs, kept by ``finchmq.broker.auth``.

Answers as Java's: SUCCESS; INVALID_PARAMETER "The username is blank"; NO_PERMISSION with the
managers' messages ("The user is existed", "The subject of User:x is not exist.", ...);
SYSTEM_ERROR when a SUPER user would be created or changed by a user that is not one (a request
without an AccessKey counts as a super user's, as in Java: authentication is off then). Get and
list answer an empty body when there is nothing to show.
"""

from __future__ import annotations

import logging

from finchmq.broker.auth import AuthError, AuthMetadataManager
from finchmq.protocol import RemotingCommand, RequestCode, ResponseCode
from finchmq.protocol.acl import ACCESS_KEY
from finchmq.protocol.auth import AclInfo, PolicyType, Resource, UserInfo, UserType
from finchmq.protocol.errors import ProtocolError
from finchmq.protocol.headers import (
    CreateAclRequestHeader,
    CreateUserRequestHeader,
    DeleteAclRequestHeader,
    DeleteUserRequestHeader,
    GetAclRequestHeader,
    GetUserRequestHeader,
    ListAclsRequestHeader,
    ListUsersRequestHeader,
    UpdateAclRequestHeader,
    UpdateUserRequestHeader,
)
from finchmq.remoting import ExecutorName, RemotingContext, handles

from ._base import BrokerProcessor

__all__ = ["AuthAdminProcessor"]

log = logging.getLogger(__name__)

_OFF = (
    "ACL 2.0 is not enabled on this broker: set authenticationEnabled or authorizationEnabled "
    "(or authenticationMetadataProvider) in broker.conf"
)


class AuthAdminProcessor(BrokerProcessor):
    """AUTH_* requests; run on the admin executor as Java's admin processor runs them."""

    executor = ExecutorName.ADMIN

    def _manager(self) -> AuthMetadataManager | None:
        return self.context.auth

    def _not_super(self, request: RemotingCommand, manager: AuthMetadataManager) -> bool:
        """Java ``isNotSuperUserLogin``: signed by a user that is not SUPER."""
        access_key = request.ext_fields.get(ACCESS_KEY)
        return bool(access_key) and not manager.is_super_user(access_key or "")

    @staticmethod
    def _refused(request: RemotingCommand, exc: AuthError) -> RemotingCommand:
        return request.make_response(ResponseCode.NO_PERMISSION, exc.message)

    @staticmethod
    def _bad_body(request: RemotingCommand, exc: ProtocolError) -> RemotingCommand:
        return request.make_response(ResponseCode.INVALID_PARAMETER, f"The body cannot be read: {exc}")

    # -- users --------------------------------------------------------------------------------

    def _user_info(self, request: RemotingCommand, username: str) -> UserInfo:
        info = UserInfo.from_json(bytes(request.body)) if request.body else UserInfo()
        info.username = username
        return info

    @handles(RequestCode.AUTH_CREATE_USER, RequestCode.AUTH_UPDATE_USER)
    async def create_or_update_user(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand:
        manager = self._manager()
        if manager is None:
            return request.make_response(ResponseCode.SYSTEM_ERROR, _OFF)
        creating = request.code == RequestCode.AUTH_CREATE_USER
        header_type = CreateUserRequestHeader if creating else UpdateUserRequestHeader
        username = header_type.from_ext_fields(request.ext_fields).username
        if not username:
            return request.make_response(ResponseCode.INVALID_PARAMETER, "The username is blank")
        try:
            user = self._user_info(request, username).to_user()
        except ProtocolError as exc:
            return self._bad_body(request, exc)
        verb = "create" if creating else "update"
        if user.user_type is UserType.SUPER and self._not_super(request, manager):
            return request.make_response(
                ResponseCode.SYSTEM_ERROR, f"The super user can only be {verb} by super user"
            )
        try:
            if creating:
                await manager.create_user(user)
            else:
                old = manager.get_user(username)
                if old is None:
                    raise AuthError("The user is not exist")
                if old.user_type is UserType.SUPER and self._not_super(request, manager):
                    raise AuthError("The super user can only be update by super user")
                await manager.update_user(user)
        except AuthError as exc:
            log.warning("%s user %s failed: %s", verb, username, exc.message)
            return self._refused(request, exc)
        log.info("ACL 2.0: user %s %sd by %s", username, verb, ctx.remote_addr)
        return request.make_response(ResponseCode.SUCCESS)

    @handles(RequestCode.AUTH_DELETE_USER)
    async def delete_user(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand:
        manager = self._manager()
        if manager is None:
            return request.make_response(ResponseCode.SYSTEM_ERROR, _OFF)
        username = DeleteUserRequestHeader.from_ext_fields(request.ext_fields).username or ""
        try:
            user = manager.get_user(username)
            if user is not None:
                if user.user_type is UserType.SUPER and self._not_super(request, manager):
                    raise AuthError("The super user can only be update by super user")
                await manager.delete_user(username)
                log.info("ACL 2.0: user %s deleted by %s", username, ctx.remote_addr)
        except AuthError as exc:
            return self._refused(request, exc)
        return request.make_response(ResponseCode.SUCCESS)

    @handles(RequestCode.AUTH_GET_USER)
    def get_user(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand:
        manager = self._manager()
        if manager is None:
            return request.make_response(ResponseCode.SYSTEM_ERROR, _OFF)
        username = GetUserRequestHeader.from_ext_fields(request.ext_fields).username
        if not username or not username.strip():
            return request.make_response(ResponseCode.INVALID_PARAMETER, "The username is blank")
        try:
            user = manager.get_user(username)
        except AuthError as exc:
            return self._refused(request, exc)
        body = UserInfo.of(user).to_json() if user is not None else b""
        return request.make_response(ResponseCode.SUCCESS, body=body)

    @handles(RequestCode.AUTH_LIST_USER)
    def list_user(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand:
        manager = self._manager()
        if manager is None:
            return request.make_response(ResponseCode.SYSTEM_ERROR, _OFF)
        name_filter = ListUsersRequestHeader.from_ext_fields(request.ext_fields).filter
        users = manager.list_user(name_filter)
        body = UserInfo.list_to_json(UserInfo.of(u) for u in users) if users else b""
        return request.make_response(ResponseCode.SUCCESS, body=body)

    # -- ACLs ---------------------------------------------------------------------------------

    @handles(RequestCode.AUTH_CREATE_ACL, RequestCode.AUTH_UPDATE_ACL)
    async def create_or_update_acl(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand:
        manager = self._manager()
        if manager is None:
            return request.make_response(ResponseCode.SYSTEM_ERROR, _OFF)
        creating = request.code == RequestCode.AUTH_CREATE_ACL
        header_type = CreateAclRequestHeader if creating else UpdateAclRequestHeader
        subject = header_type.from_ext_fields(request.ext_fields).subject
        try:
            info = AclInfo.from_json(bytes(request.body)) if request.body else None
        except ProtocolError as exc:
            return self._bad_body(request, exc)
        if info is None or not info.policies:
            return request.make_response(ResponseCode.NO_PERMISSION, "The body of acl is null")
        acl = info.to_acl()
        acl.subject = acl.subject or subject or ""
        try:
            await (manager.create_acl(acl) if creating else manager.update_acl(acl))
        except AuthError as exc:
            log.warning("%s acl for %s failed: %s", "create" if creating else "update", subject, exc.message)
            return self._refused(request, exc)
        done = "created" if creating else "updated"
        log.info("ACL 2.0: ACL of %s %s by %s", acl.subject, done, ctx.remote_addr)
        return request.make_response(ResponseCode.SUCCESS)

    @handles(RequestCode.AUTH_DELETE_ACL)
    async def delete_acl(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand:
        manager = self._manager()
        if manager is None:
            return request.make_response(ResponseCode.SYSTEM_ERROR, _OFF)
        header = DeleteAclRequestHeader.from_ext_fields(request.ext_fields)
        try:
            await manager.delete_acl(
                header.subject or "", PolicyType.by_name(header.policy_type), Resource.parse(header.resource)
            )
        except AuthError as exc:
            return self._refused(request, exc)
        what = header.resource or "all"
        log.info("ACL 2.0: ACL of %s (%s) deleted by %s", header.subject, what, ctx.remote_addr)
        return request.make_response(ResponseCode.SUCCESS)

    @handles(RequestCode.AUTH_GET_ACL)
    def get_acl(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand:
        manager = self._manager()
        if manager is None:
            return request.make_response(ResponseCode.SYSTEM_ERROR, _OFF)
        subject = GetAclRequestHeader.from_ext_fields(request.ext_fields).subject
        try:
            acl = manager.get_acl(subject or "")
        except AuthError as exc:
            return self._refused(request, exc)
        body = AclInfo.of(acl).to_json() if acl is not None else b""
        return request.make_response(ResponseCode.SUCCESS, body=body)

    @handles(RequestCode.AUTH_LIST_ACL)
    def list_acl(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand:
        manager = self._manager()
        if manager is None:
            return request.make_response(ResponseCode.SYSTEM_ERROR, _OFF)
        header = ListAclsRequestHeader.from_ext_fields(request.ext_fields)
        acls = manager.list_acl(header.subject_filter, header.resource_filter)
        body = AclInfo.list_to_json(AclInfo.of(a) for a in acls) if acls else b""
        return request.make_response(ResponseCode.SUCCESS, body=body)
