"""The console's web layer: a Starlette app serving one static page (``static/index.html``
and its script) and the JSON API the page calls.

Every API answer is JSON. A failure is ``{"error": text, "code": RocketMQ response code or
null, "codeName": its name}`` with an HTTP status that says whose fault it was: 400 bad input,
404 an unknown topic or group, 502 the cluster refused, 504 it did not answer in time. Requests
that change something must be ``application/json`` (a form on another site cannot send that
without the browser asking first, which this app never allows). With a login (``auth``), the
whole app sits behind ``auth.AuthGuard``: sessions, CSRF tokens and roles are checked there, for
every route, before a handler runs.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from finchmq.client import MQClientError, NoRouteError, ValidationError
from finchmq.client.errors import SubscriptionGroupNotExistError
from finchmq.protocol.codes import ResponseCode

from .auth import Auth, AuthGuard, session_of
from .sampler import Sampler
from .service import ConsoleService

__all__ = ["STATIC_DIR", "create_app"]

log = logging.getLogger(__name__)

STATIC_DIR = Path(__file__).parent / "static"
_HOUR_MS = 3_600_000

Handler = Callable[[Request], Awaitable[Any]]
_GROUP_TARGET = frozenset(("group", "cluster", "brokerAddr"))  # a group body's fields that are not settings


class BadRequest(ValueError):
    """A missing or malformed parameter (HTTP 400)."""


def _code_name(code: int | None) -> str | None:
    if code is None:
        return None
    try:
        return ResponseCode(code).name
    except ValueError:
        return None


def _error(status: int, text: str, code: int | None = None) -> JSONResponse:
    return JSONResponse({"error": text, "code": code, "codeName": _code_name(code)}, status_code=status)


def _api(handler: Handler) -> Callable[[Request], Awaitable[Response]]:
    """Wrap a handler returning JSON-ready data: errors become JSON answers the page shows."""

    async def endpoint(request: Request) -> Response:
        try:
            return JSONResponse(await handler(request))
        except (BadRequest, ValidationError) as exc:
            return _error(400, str(exc), getattr(exc, "response_code", None))
        except (NoRouteError, SubscriptionGroupNotExistError) as exc:
            return _error(404, str(exc), exc.response_code)
        except MQClientError as exc:
            return _error(502, str(exc), exc.response_code)
        except TimeoutError as exc:
            return _error(504, f"the cluster did not answer in time: {exc}".rstrip(": "))

    return endpoint


def _text(request: Request, name: str, *, required: bool = True) -> str | None:
    value = request.query_params.get(name, "").strip()
    if not value and required:
        raise BadRequest(f"missing parameter {name!r}")
    return value or None


def _int(value: Any, name: str, default: int | None = None) -> int:
    if value is None or value == "":
        if default is None:
            raise BadRequest(f"missing parameter {name!r}")
        return default
    if isinstance(value, bool):
        raise BadRequest(f"{name} must be a whole number, not {value!r}")
    try:
        return int(value)
    except (TypeError, ValueError):
        raise BadRequest(f"{name} must be a whole number, not {value!r}") from None


async def _json_body(request: Request) -> dict[str, Any]:
    if request.headers.get("content-type", "").split(";")[0].strip() != "application/json":
        raise BadRequest("send the request as application/json")
    try:
        body = await request.json()
    except ValueError:
        raise BadRequest("the request body is not JSON") from None
    if not isinstance(body, dict):
        raise BadRequest("the request body must be a JSON object")
    return body


def _field(body: dict[str, Any], name: str, *, required: bool = True) -> str | None:
    value = body.get(name)
    if value is None or (isinstance(value, str) and not value.strip()):
        if required:
            raise BadRequest(f"missing field {name!r}")
        return None
    if not isinstance(value, str):
        raise BadRequest(f"{name} must be text")
    return value.strip()


def _list(body: dict[str, Any], name: str) -> list[str]:
    """A list of text: a JSON list of strings, or one string of comma-separated items."""
    value = body.get(name)
    if value is None or value == "":
        return []
    if isinstance(value, str):
        value = value.split(",")
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise BadRequest(f"{name} must be a list of text")
    return [v.strip() for v in value if v.strip()]


def _bool(body: dict[str, Any], name: str, default: bool = False) -> bool:
    value = body.get(name, default)
    if not isinstance(value, bool):
        raise BadRequest(f"{name} must be true or false, not {value!r}")
    return value


def _where(body: dict[str, Any]) -> dict[str, str | None]:
    """The ``cluster`` or ``brokerAddr`` a change goes to."""
    return {
        "cluster": _field(body, "cluster", required=False),
        "broker_addr": _field(body, "brokerAddr", required=False),
    }


def _time_range(request: Request) -> tuple[int, int]:
    now = int(time.time() * 1000)
    end = _int(request.query_params.get("end"), "end", now)
    begin = _int(request.query_params.get("begin"), "begin", end - _HOUR_MS)
    return begin, end


def create_app(service: ConsoleService, sampler: Sampler, auth: Auth | None = None) -> Starlette:
    """The console's ASGI app over a started ``service`` and ``sampler``, behind ``auth``'s login
    when given."""

    async def session(request: Request) -> Any:
        return session_of(request)

    async def cluster(request: Request) -> Any:
        return await service.cluster()

    async def topics(request: Request) -> Any:
        return await service.topics()

    async def topic(request: Request) -> Any:
        return await service.topic(request.path_params["topic"])

    async def create_topic(request: Request) -> Any:
        body = await _json_body(request)
        return await service.create_topic(
            _field(body, "topic") or "",
            cluster=_field(body, "cluster", required=False),
            broker_addr=_field(body, "brokerAddr", required=False),
            read_queue_nums=_int(body.get("readQueueNums"), "readQueueNums", 8),
            write_queue_nums=_int(body.get("writeQueueNums"), "writeQueueNums", 8),
            perm=_int(body.get("perm"), "perm", 6),
            order=bool(body.get("order", False)),
        )

    async def delete_topic(request: Request) -> Any:
        await _json_body(request)
        return await service.delete_topic(
            request.path_params["topic"], _text(request, "cluster", required=False)
        )

    async def groups(request: Request) -> Any:
        return await service.groups()

    async def group(request: Request) -> Any:
        return await service.group(request.path_params["group"])

    async def save_group(request: Request) -> Any:
        body = await _json_body(request)
        return await service.save_group(
            _field(body, "group") or "",
            {k: v for k, v in body.items() if k not in _GROUP_TARGET},
            cluster=_field(body, "cluster", required=False),
            broker_addr=_field(body, "brokerAddr", required=False),
        )

    async def delete_group(request: Request) -> Any:
        body = await _json_body(request)
        return await service.delete_group(
            request.path_params["group"],
            cluster=_field(body, "cluster", required=False),
            broker_addr=_field(body, "brokerAddr", required=False),
        )

    async def acl(request: Request) -> Any:
        return await service.acl()

    async def save_acl_account(request: Request) -> Any:
        body = await _json_body(request)
        return await service.save_acl_account(
            _field(body, "accessKey") or "",
            secret_key=_field(body, "secretKey", required=False),
            white_remote_address=_field(body, "whiteRemoteAddress", required=False),
            admin=_bool(body, "admin"),
            default_topic_perm=_field(body, "defaultTopicPerm", required=False),
            default_group_perm=_field(body, "defaultGroupPerm", required=False),
            topic_perms=_list(body, "topicPerms"),
            group_perms=_list(body, "groupPerms"),
            **_where(body),
        )

    async def delete_acl_account(request: Request) -> Any:
        body = await _json_body(request)
        return await service.delete_acl_account(request.path_params["access_key"], **_where(body))

    async def save_user(request: Request) -> Any:
        body = await _json_body(request)
        creating = "username" not in request.path_params
        return await service.save_user(
            _field(body, "username") or "" if creating else request.path_params["username"],
            password=_field(body, "password", required=False),
            user_type=_field(body, "userType", required=False),
            user_status=_field(body, "userStatus", required=False),
            create=creating,
            **_where(body),
        )

    async def delete_user(request: Request) -> Any:
        body = await _json_body(request)
        return await service.delete_user(request.path_params["username"], **_where(body))

    async def save_acl_rule(request: Request) -> Any:
        body = await _json_body(request)
        return await service.save_acl_rule(
            _field(body, "subject") or "",
            resources=_list(body, "resources"),
            actions=_list(body, "actions"),
            decision=_field(body, "decision") or "",
            source_ips=_list(body, "sourceIps"),
            **_where(body),
        )

    async def delete_acl_rule(request: Request) -> Any:
        body = await _json_body(request)
        return await service.delete_acl_rule(
            _field(body, "subject") or "", _field(body, "resource", required=False), **_where(body)
        )

    async def producer_groups(request: Request) -> Any:
        return await service.producer_groups()

    async def producers(request: Request) -> Any:
        return await service.producers(_text(request, "topic") or "", _text(request, "group") or "")

    async def reset_offset(request: Request) -> Any:
        body = await _json_body(request)
        return await service.reset_offset(
            request.path_params["group"],
            _field(body, "topic") or "",
            _int(body.get("timestamp"), "timestamp"),
            bool(body.get("force", True)),
        )

    async def dlq(request: Request) -> Any:
        begin, end = _time_range(request)
        return await service.dlq_messages(request.path_params["group"], begin, end)

    async def resend(request: Request) -> Any:
        body = await _json_body(request)
        return await service.resend_dlq(
            request.path_params["group"],
            _field(body, "msgId") or "",
            _field(body, "clientId", required=False),
        )

    async def messages(request: Request) -> Any:
        topic = _text(request, "topic") or ""
        key = _text(request, "key", required=False)
        if key is not None:
            return await service.messages_by_key(topic, key)
        begin, end = _time_range(request)
        return await service.messages_by_time(topic, begin, end)

    async def message(request: Request) -> Any:
        return await service.message(request.path_params["msg_id"], _text(request, "topic", required=False))

    async def send(request: Request) -> Any:
        body = await _json_body(request)
        text = body.get("body")
        if not isinstance(text, str) or not text:
            raise BadRequest("missing field 'body' (the message text)")
        return await service.send(
            _field(body, "topic") or "",
            text,
            tags=_field(body, "tags", required=False),
            keys=_field(body, "keys", required=False),
            trace=bool(body.get("trace", False)),
        )

    async def broker_series(request: Request) -> Any:
        return sampler.broker_series()

    async def group_series(request: Request) -> Any:
        return sampler.group_series(request.path_params["group"])

    async def index(request: Request) -> Response:
        return FileResponse(STATIC_DIR / "index.html", headers={"Cache-Control": "no-cache"})

    async def not_found(request: Request, exc: Exception) -> Response:
        detail = exc.detail if isinstance(exc, HTTPException) else str(exc)
        status = exc.status_code if isinstance(exc, HTTPException) else 500
        return _error(status, f"{request.method} {request.url.path}: {detail}")

    routes = [
        Route("/", index),
        Route("/api/session", _api(session)),
        Route("/api/cluster", _api(cluster)),
        Route("/api/topics", _api(topics)),
        Route("/api/topics", _api(create_topic), methods=["POST"]),
        Route("/api/topics/{topic}", _api(topic)),
        Route("/api/topics/{topic}", _api(delete_topic), methods=["DELETE"]),
        Route("/api/groups", _api(groups)),
        Route("/api/groups", _api(save_group), methods=["POST"]),
        Route("/api/groups/{group}", _api(group)),
        Route("/api/groups/{group}", _api(delete_group), methods=["DELETE"]),
        Route("/api/groups/{group}/reset-offset", _api(reset_offset), methods=["POST"]),
        Route("/api/groups/{group}/dlq", _api(dlq)),
        Route("/api/groups/{group}/dlq/resend", _api(resend), methods=["POST"]),
        Route("/api/producers", _api(producers)),
        Route("/api/producer-groups", _api(producer_groups)),
        Route("/api/acl", _api(acl)),
        Route("/api/acl/accounts", _api(save_acl_account), methods=["POST"]),
        Route("/api/acl/accounts/{access_key}", _api(delete_acl_account), methods=["DELETE"]),
        Route("/api/acl/users", _api(save_user), methods=["POST"]),
        Route("/api/acl/users/{username}", _api(save_user), methods=["POST"]),
        Route("/api/acl/users/{username}", _api(delete_user), methods=["DELETE"]),
        Route("/api/acl/rules", _api(save_acl_rule), methods=["POST"]),
        Route("/api/acl/rules", _api(delete_acl_rule), methods=["DELETE"]),
        Route("/api/messages", _api(messages)),
        Route("/api/messages", _api(send), methods=["POST"]),
        Route("/api/messages/{msg_id}", _api(message)),
        Route("/api/series/brokers", _api(broker_series)),
        Route("/api/series/groups/{group}", _api(group_series)),
        Mount("/static", StaticFiles(directory=STATIC_DIR), name="static"),
    ]
    middleware = [] if auth is None else [Middleware(AuthGuard, auth=auth)]
    return Starlette(routes=routes, exception_handlers={HTTPException: not_found}, middleware=middleware)
