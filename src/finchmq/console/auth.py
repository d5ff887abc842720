"""The console's login: accounts in a file, sessions that expire, CSRF tokens and two roles.

**The accounts file** keeps rocketmq-dashboard's ``users.properties`` layout (one account a line,
``NAME=PASSWORD[,ROLE]``, ``#`` comments, role ``1`` admin and ``0`` or nothing a normal user) with
one change: the password is stored hashed, never in clear (``scrypt$N$r$p$salt$hash``, hashlib's
scrypt with a random 16-byte salt, both in unpadded URL-safe base64). An admin can do everything
the console offers; a normal (``read-only``) user sees every page and changes nothing. The file
is read again when it changes (as the dashboard does), so ``finchmq console-user`` takes effect
without a restart; a file that no longer parses keeps the accounts read before, with an error in
the log. Write it with ``finchmq console-user``: it keeps comments and other accounts.

**Sessions** live in the console's memory (a restart logs everyone out; a logout ends the session
on the server, not only in the browser): a random token in an ``HttpOnly``, ``SameSite=Strict``
cookie (``Secure`` when the page is served over https, directly or behind a proxy that says so
in ``X-Forwarded-Proto``), dropped after ``timeout`` seconds without a request.

**CSRF**: each session has its own random token, which the page reads from ``/api/session`` and
sends in the ``X-CSRF-Token`` header of every request that changes something. A missing or wrong
token is refused with 403 (and one warning in the log); so is a change asked by a read-only
user, checked here for every non-GET request whatever its route. The login form itself carries a
token bound to a short cookie of its own (double submit), so no other site can log a browser in.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import html
import logging
import os
import re
import secrets
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote

from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = [
    "ADMIN",
    "CSRF_HEADER",
    "DEFAULT_SESSION_TIMEOUT",
    "READ_ONLY",
    "SESSION_COOKIE",
    "Account",
    "AccountsError",
    "AccountsFile",
    "Auth",
    "AuthGuard",
    "Session",
    "hash_password",
    "is_loopback",
    "read_accounts",
    "session_of",
    "verify_password",
    "write_account",
]

log = logging.getLogger(__name__)

ADMIN = "admin"
READ_ONLY = "read-only"
_ROLE_OF_DIGIT = {"1": ADMIN, "0": READ_ONLY}  # rocketmq-dashboard's users.properties numbers
_DIGIT_OF_ROLE = {ADMIN: "1", READ_ONLY: "0"}
SESSION_COOKIE = "finchmq-console-session"
LOGIN_COOKIE = "finchmq-console-login"
CSRF_HEADER = "x-csrf-token"
DEFAULT_SESSION_TIMEOUT = 1800.0  # seconds without a request (the dashboard's servlet default)
_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_NAME = re.compile(r"^[A-Za-z0-9_.@-]{1,64}$")
_SCRYPT_N, _SCRYPT_R, _SCRYPT_P, _SCRYPT_LEN = 2**14, 8, 1, 32


class AccountsError(ValueError):
    """The accounts file is missing, malformed or holds a password in clear."""


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def hash_password(password: str) -> str:
    """``scrypt$N$r$p$salt$hash`` of ``password`` with a fresh random salt."""
    salt = os.urandom(16)
    digest = hashlib.scrypt(
        password.encode(), salt=salt, n=_SCRYPT_N, r=_SCRYPT_R, p=_SCRYPT_P, dklen=_SCRYPT_LEN
    )
    return f"scrypt${_SCRYPT_N}${_SCRYPT_R}${_SCRYPT_P}${_b64(salt)}${_b64(digest)}"


def _is_hash(stored: str) -> bool:
    parts = stored.split("$")
    return len(parts) == 6 and parts[0] == "scrypt" and all(p.isdigit() for p in parts[1:4])


def verify_password(password: str, stored: str) -> bool:
    """Whether ``password`` is the one ``stored`` (a ``hash_password`` answer) was made from."""
    if not _is_hash(stored):
        return False
    _, n, r, p, salt, digest = stored.split("$")
    expected = _unb64(digest)
    try:
        actual = hashlib.scrypt(
            password.encode(), salt=_unb64(salt), n=int(n), r=int(r), p=int(p), dklen=len(expected),
            maxmem=256 * 1024 * 1024,
        )  # fmt: skip
    except ValueError:  # parameters this OpenSSL refuses
        return False
    return hmac.compare_digest(actual, expected)


_DUMMY_HASH = hash_password(secrets.token_hex(8))  # an unknown name costs as much as a wrong password


@dataclass(frozen=True)
class Account:
    """One line of the accounts file."""

    name: str
    password_hash: str
    role: str

    @property
    def is_admin(self) -> bool:
        return self.role == ADMIN


def _parse_line(line: str, number: int, path: Path) -> Account | None:
    text = line.strip()
    if not text or text.startswith(("#", "!")):
        return None
    name, sep, value = text.partition("=")
    name = name.strip()
    if not sep or not _NAME.match(name):
        raise AccountsError(
            f"{path}:{number}: expected NAME=PASSWORD_HASH[,ROLE], a name of letters, digits, _.@-"
        )
    secret, _, digit = value.strip().rpartition(",") if "," in value else (value.strip(), "", "0")
    role = _ROLE_OF_DIGIT.get(digit.strip())
    if role is None:
        raise AccountsError(f"{path}:{number}: the role of {name!r} is {digit!r}: 1 (admin) or 0 (read-only)")
    return Account(name, secret.strip(), role)


def read_accounts(path: Path, *, hashed: bool = True) -> dict[str, Account]:
    """The accounts of the file at ``path``; ``AccountsError`` if it cannot be read or parsed, or
    (``hashed``) if a password is in clear, as rocketmq-dashboard writes them."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise AccountsError(f"cannot read the console's accounts file {path}: {exc.strerror}") from None
    accounts: dict[str, Account] = {}
    for number, line in enumerate(lines, 1):
        account = _parse_line(line, number, path)
        if account is None:
            continue
        if hashed and not _is_hash(account.password_hash):
            raise AccountsError(
                f"{path}:{number}: the password of {account.name!r} is not hashed; set it with "
                f"'finchmq console-user passwd {account.name} --users {path}'"
            )
        accounts[account.name] = account
    return accounts


def write_account(path: Path, name: str, *, password_hash: str | None = None, role: str | None = None,
                  delete: bool = False) -> Account | None:  # fmt: skip
    """Add, change (a ``password_hash``, a ``role``) or ``delete`` the account ``name`` in the file
    at ``path`` (created, mode 0600, if missing), keeping its other lines; the file is replaced
    atomically. Returns the account as written (``None`` when deleted)."""
    if not _NAME.match(name):
        raise AccountsError(f"a user name is 1-64 letters, digits or _.@-, not {name!r}")
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else [
        "# finchmq console accounts: NAME=PASSWORD_HASH,ROLE (role 1 admin, 0 read-only), as",
        "# rocketmq-dashboard's users.properties but hashed. Edit with 'finchmq console-user'.",
    ]  # fmt: skip
    old = read_accounts(path, hashed=False).get(name) if path.exists() else None
    written: Account | None = None
    if not delete:
        if old is None and (password_hash is None or role is None):
            raise AccountsError(f"no account {name!r} in {path}")
        written = Account(
            name,
            password_hash if password_hash is not None else old.password_hash,  # type: ignore[union-attr]
            role if role is not None else old.role,  # type: ignore[union-attr]
        )
    elif old is None:
        raise AccountsError(f"no account {name!r} in {path}")
    out: list[str] = []
    for number, line in enumerate(lines, 1):
        account = _parse_line(line, number, path)
        if account is not None and account.name == name:
            if written is not None:
                out.append(f"{name}={written.password_hash},{_DIGIT_OF_ROLE[written.role]}")
            continue
        out.append(line)
    if written is not None and old is None:
        out.append(f"{name}={written.password_hash},{_DIGIT_OF_ROLE[written.role]}")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write("\n".join(out) + "\n")
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return written


class AccountsFile:
    """The accounts of a file, read again when its modification time or size changes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._stamp = self._stat()
        self.accounts = read_accounts(path)
        if not self.accounts:
            raise AccountsError(
                f"the console's accounts file {path} has no account: add one with "
                f"'finchmq console-user add NAME --role admin --users {path}'"
            )

    def _stat(self) -> tuple[int, int, int] | None:
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return st.st_mtime_ns, st.st_size, st.st_ino

    def get(self, name: str) -> Account | None:
        """The account ``name`` as the file says now."""
        stamp = self._stat()
        if stamp != self._stamp:
            self._stamp = stamp
            try:
                self.accounts = read_accounts(self.path)
                log.info("console accounts reloaded from %s: %d account(s)", self.path, len(self.accounts))
            except AccountsError as exc:
                log.error("console accounts file changed but cannot be used, keeping the previous: %s", exc)
        return self.accounts.get(name)


@dataclass
class Session:
    """A logged-in browser."""

    token: str
    user: str
    csrf_token: str
    expires: float  # time.monotonic()


class Auth:
    """The console's login: the accounts file, the live sessions and their ``timeout`` (seconds
    without a request)."""

    def __init__(self, users_file: Path, *, timeout: float = DEFAULT_SESSION_TIMEOUT) -> None:
        if timeout <= 0:
            raise ValueError(f"the session timeout must be positive, got {timeout}")
        self.accounts = AccountsFile(users_file)
        self.timeout = timeout
        self._sessions: dict[str, Session] = {}

    async def authenticate(self, name: str, password: str) -> Account | None:
        """The account if ``password`` is its own (hashing runs off the event loop)."""
        account = self.accounts.get(name)
        stored = account.password_hash if account is not None else _DUMMY_HASH
        ok = await asyncio.to_thread(verify_password, password, stored)
        return account if ok and account is not None else None

    def open(self, account: Account) -> Session:
        """A new session for ``account`` (expired ones are dropped on the way)."""
        now = time.monotonic()
        for token in [t for t, s in self._sessions.items() if s.expires <= now]:
            del self._sessions[token]
        token, csrf = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
        session = Session(token, account.name, csrf, now + self.timeout)
        self._sessions[session.token] = session
        return session

    def session(self, token: str | None) -> tuple[Session, Account] | None:
        """The live session of a cookie's ``token`` and its account as the file says now (its
        expiry moves on); ``None`` when unknown, expired, or its account was deleted."""
        if not token:
            return None
        session = self._sessions.get(token)
        if session is None:
            return None
        now = time.monotonic()
        account = self.accounts.get(session.user)
        if session.expires <= now or account is None:
            del self._sessions[token]
            return None
        session.expires = now + self.timeout
        return session, account

    def close(self, token: str | None) -> None:
        """End the session of ``token`` (logout)."""
        if token:
            self._sessions.pop(token, None)


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a listen address) is reachable from this machine only."""
    import ipaddress  # noqa: PLC0415  (only at start-up)

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to anything


def _client(request: Request) -> str:
    return f"{request.client.host}:{request.client.port}" if request.client else "?"


def _json_error(status: int, text: str) -> JSONResponse:
    return JSONResponse({"error": text, "code": None, "codeName": None}, status_code=status)


def _set_cookie(response: Response, request: Request, name: str, value: str, path: str = "/") -> None:
    response.set_cookie(
        name, value, path=path, httponly=True, samesite="strict", secure=request.url.scheme == "https"
    )


def _safe_next(target: str | None) -> str:
    """A local path to go to after logging in (never another site)."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/"
    return target


_LOGIN_PAGE = """<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <meta name="viewport" content="width=device-width, initial-scale=1">
  <title>finchmq console: log in</title>
  <link rel="stylesheet" href="/static/style.css">
</head>
<body>
  <header><span class="brand">finchmq console</span></header>
  <main id="main">
    <section class="card login">
      <h1>Log in</h1>
      {error}
      <form method="post" action="/login" class="form">
        <input type="hidden" name="csrf" value="{csrf}">
        <input type="hidden" name="next" value="{next}">
        <label>User <input id="login-user" name="username" autocomplete="username" required autofocus></label>
        <label>Password <input id="login-password" name="password" type="password"
          autocomplete="current-password" required></label>
        <button id="login-submit" type="submit">Log in</button>
      </form>
    </section>
  </main>
</body>
</html>
"""


class AuthGuard:
    """ASGI middleware in front of the whole app: without a live session only the login page and
    the static files are served (the API answers 401, a page redirects to ``/login``); a request
    that is not GET/HEAD/OPTIONS needs the session's CSRF token and, but for ``/logout``, an admin."""

    def __init__(self, app: ASGIApp, auth: Auth) -> None:
        self.app = app
        self.auth = auth

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope, receive)
        path = request.url.path
        if path == "/login":
            response = await self._login(request) if request.method == "POST" else self._login_page(request)
            await response(scope, receive, send)
            return
        if path.startswith("/static/") and request.method in _SAFE_METHODS:
            await self.app(scope, receive, send)
            return
        found = self.auth.session(request.cookies.get(SESSION_COOKIE))
        if found is None:
            await self._no_session(request)(scope, receive, send)
            return
        session, account = found
        if request.method not in _SAFE_METHODS:
            refused = self._refuse_change(request, session, account)
            if refused is not None:
                await refused(scope, receive, send)
                return
            if path == "/logout":
                self.auth.close(session.token)
                log.info("console: %s logged out from %s", account.name, _client(request))
                response = JSONResponse({"loggedOut": account.name})
                response.delete_cookie(SESSION_COOKIE, path="/", httponly=True, samesite="strict")
                await response(scope, receive, send)
                return
        scope.setdefault("state", {})["console_session"] = {
            "user": account.name,
            "role": account.role,
            "csrfToken": session.csrf_token,
        }
        await self.app(scope, receive, send)

    def _no_session(self, request: Request) -> Response:
        if request.url.path.startswith("/api/") or request.method not in _SAFE_METHODS:
            return _json_error(401, "log in first: no session, or it expired")
        return RedirectResponse(f"/login?next={quote(request.url.path)}", status_code=303)

    def _refuse_change(self, request: Request, session: Session, account: Account) -> Response | None:
        sent = request.headers.get(CSRF_HEADER, "")
        if not hmac.compare_digest(sent.encode(), session.csrf_token.encode()):
            why = "a wrong" if sent else "no"
            log.warning(
                "console: refused %s %s from %s (user %s): %s CSRF token",
                request.method, request.url.path, _client(request), account.name, why,
            )  # fmt: skip
            return _json_error(403, f"refused: {why} CSRF token (reload the page)")
        if not account.is_admin and request.url.path != "/logout":
            log.warning(
                "console: refused %s %s from %s: %s is read-only",
                request.method, request.url.path, _client(request), account.name,
            )  # fmt: skip
            return _json_error(403, f"refused: {account.name} is a read-only account")
        return None

    def _login_page(self, request: Request, *, error: str = "", status: int = 200,
                    next_path: str | None = None) -> Response:  # fmt: skip
        # the browser's token, kept: another tab's (or the favicon's) trip here must not void this form
        csrf = request.cookies.get(LOGIN_COOKIE) or secrets.token_urlsafe(32)
        target = _safe_next(next_path if next_path is not None else request.query_params.get("next"))
        shown = f'<div id="login-error" class="error" role="alert">{html.escape(error)}</div>'
        body = _LOGIN_PAGE.format(
            error=shown if error else "",
            csrf=html.escape(csrf, quote=True),
            next=html.escape(target, quote=True),
        )
        response = HTMLResponse(body, status_code=status, headers={"Cache-Control": "no-store"})
        _set_cookie(response, request, LOGIN_COOKIE, csrf, path="/login")
        return response

    async def _login(self, request: Request) -> Response:
        form = {k: v[0] for k, v in parse_qs((await request.body()).decode("utf-8", "replace")).items()}
        next_path = _safe_next(form.get("next"))
        expected = request.cookies.get(LOGIN_COOKIE, "")
        if not expected or not hmac.compare_digest(form.get("csrf", "").encode(), expected.encode()):
            log.warning("console: refused a login from %s: a missing or wrong CSRF token", _client(request))
            return self._login_page(
                request, error="The login form expired: try again.", status=403, next_path=next_path
            )
        name = form.get("username", "").strip()
        account = await self.auth.authenticate(name, form.get("password", ""))
        if account is None:
            log.warning("console: failed login as %r from %s", name, _client(request))
            return self._login_page(
                request, error="Wrong user name or password.", status=401, next_path=next_path
            )
        session = self.auth.open(account)
        log.info("console: %s (%s) logged in from %s", account.name, account.role, _client(request))
        response = RedirectResponse(next_path, status_code=303)
        _set_cookie(response, request, SESSION_COOKIE, session.token)
        response.delete_cookie(LOGIN_COOKIE, path="/login", httponly=True, samesite="strict")
        return response


def session_of(request: Request) -> dict[str, Any]:
    """What ``/api/session`` answers: ``{"login": false}`` without a login, else the user, the
    role and the CSRF token the page sends back."""
    found = request.scope.get("state", {}).get("console_session")
    return {"login": False} if found is None else {"login": True, **found}
