"""Incremental, sans-IO codec for RocketMQ remoting frames (h11's API shape).

Strategy:
    ``receive_data(b)`` only buffers (``b""`` means the peer closed). ``next_command()`` returns
    one ``RemotingCommand``, ``NEED_DATA`` when the buffer holds no complete frame, or ``CLOSED``
    after end of input with nothing left; it raises ``RemoteProtocolError`` for bad input and the
    codec then stays in ``CodecState.ERROR``: every later call raises the same error. ``send(cmd)``
    returns the frame bytes (``encode_parts`` the header part and the body, for ``writelines``).

Frame: ``int32 length | int32 (serializeType << 24 | headerLength) | header | body`` where length
counts everything after itself. The declared length is checked as soon as its four bytes arrive,
so the codec never buffers more than ``max_frame_size`` for an incomplete frame. Header JSON is
Java fastjson's shape; the ROCKETMQ binary header is ``RocketMQSerializable``'s layout.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Callable
from typing import Any, Final, Literal

from ._compiled import load as load_compiled
from ._json import dumps as _dumps
from ._json import loads_raw as _loads
from .codes import LanguageCode, ResponseCode, SerializeType
from .command import Body, RemotingCommand
from .errors import LocalProtocolError, ProtocolError, RemoteProtocolError

__all__ = [
    "CLOSED",
    "DEFAULT_MAX_FRAME_SIZE",
    "NEED_DATA",
    "CodecState",
    "RemotingCodec",
    "Signal",
    "decode_frame",
    "encode_command",
    "encode_parts",
]

# Java NettyDecoder: com.rocketmq.remoting.frameMaxLength, counted over the whole frame.
DEFAULT_MAX_FRAME_SIZE: Final = 16 * 1024 * 1024

_PREFIX = struct.Struct(">ii")  # length, header-length word
_INT32 = struct.Struct(">i")
_INT16 = struct.Struct(">h")
_ROCKETMQ_FIXED = struct.Struct(">hbhiii")  # code, language, version, opaque, flag, remarkLength
_ROCKETMQ_FIXED_SIZE: Final = _ROCKETMQ_FIXED.size + 4  # + extFieldsLength
_MIN_JSON_HEADER: Final = 2  # "{}"
_COMPACT_AFTER: Final = 256 * 1024  # drop consumed bytes from the buffer past this point

_LANGUAGE_BY_NAME: dict[str, LanguageCode] = {lc.name: lc for lc in LanguageCode}
_LANGUAGE_BY_VALUE: dict[int, LanguageCode] = {lc.value: lc for lc in LanguageCode}


class Signal(enum.Enum):
    """Non-command results of ``next_command``."""

    NEED_DATA = "NEED_DATA"
    CLOSED = "CLOSED"


NEED_DATA: Final = Signal.NEED_DATA
CLOSED: Final = Signal.CLOSED


class CodecState(enum.Enum):
    OPEN = "OPEN"
    CLOSED = "CLOSED"  # the peer ended its stream
    ERROR = "ERROR"  # bad input seen; poisoned


def _remote(msg: str) -> RemoteProtocolError:
    return RemoteProtocolError(msg, ResponseCode.SYSTEM_ERROR)


# ---------------------------------------------------------------------------------------------
# Header decoding


_INT32_MIN: Final = -(2**31)
_INT32_MAX: Final = 2**31 - 1


def _as_int(obj: dict[str, Any], key: str, default: int | None) -> int:
    value = obj.get(key, default)
    if type(value) is int and _INT32_MIN <= value <= _INT32_MAX:
        return value
    if value is None:
        raise _remote(f"malformed header: required field {key!r} is missing")
    # fastjson coerces numeric strings; do the same, but never booleans or fractions.
    number: int | None = None
    if type(value) is int:
        number = value
    elif isinstance(value, str):
        try:
            number = int(value.strip())
        except ValueError:
            number = None
    elif isinstance(value, float) and value.is_integer():
        number = int(value)
    if number is None:
        raise _remote(f"malformed header: field {key!r} must be an integer, got {value!r}")
    if not _INT32_MIN <= number <= _INT32_MAX:
        raise _remote(f"malformed header: field {key!r} = {number} does not fit a Java int")
    return number


def _ext_value_to_str(key: str, value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, dict | list):
        return _dumps(value).decode("utf-8")
    raise _remote(f"malformed header: extFields[{key!r}] has unsupported value {value!r}")


def _normalize_ext_fields(raw: object) -> dict[str, str]:
    """Java keeps extFields as strings; the C++ client sends some as numbers or 0/1."""
    if raw is None:
        return {}
    if type(raw) is not dict:
        raise _remote(f"malformed header: extFields must be an object, got {type(raw).__name__}")
    for value in raw.values():
        if type(value) is not str:
            break
    else:
        return raw
    fields: dict[str, str] = {}
    for key, value in raw.items():
        if value is None:
            continue  # Java drops null entries when it builds the custom header
        fields[key] = value if type(value) is str else _ext_value_to_str(key, value)
    return fields


_JSON = SerializeType.JSON
_ROCKETMQ = SerializeType.ROCKETMQ
_OTHER = LanguageCode.OTHER


def _command_from_json_py(header: bytes | bytearray, body: bytes) -> RemotingCommand:
    try:
        obj = _loads(header)
    except (ValueError, RecursionError) as exc:
        raise _remote(f"malformed header: not valid JSON ({exc})") from None
    if type(obj) is not dict:
        raise _remote(f"malformed header: JSON header must be an object, got {type(obj).__name__}")
    get = obj.get
    code = get("code")
    version = get("version", 0)
    opaque = get("opaque", 0)
    flag = get("flag", 0)
    # Fast path: well-formed headers from Java, C++ and finchmq peers hold plain ints.
    if not (
        type(code) is int
        and type(version) is int
        and type(opaque) is int
        and type(flag) is int
        and _INT32_MIN <= code <= _INT32_MAX
        and _INT32_MIN <= opaque <= _INT32_MAX
        and _INT32_MIN <= flag <= _INT32_MAX
        and _INT32_MIN <= version <= _INT32_MAX
    ):
        code = _as_int(obj, "code", None)
        version = _as_int(obj, "version", 0)
        opaque = _as_int(obj, "opaque", 0)
        flag = _as_int(obj, "flag", 0)
    language_raw = get("language", "JAVA")
    if type(language_raw) is str:
        language = _LANGUAGE_BY_NAME.get(language_raw, _OTHER)
    elif type(language_raw) is int:
        language = _LANGUAGE_BY_VALUE.get(language_raw, _OTHER)
    else:
        language = _OTHER
    remark = get("remark")
    if remark is not None and type(remark) is not str:
        raise _remote(f"malformed header: remark must be a string, got {remark!r}")
    ext = get("extFields")
    if type(ext) is dict:
        for value in ext.values():
            if type(value) is not str:
                ext = _normalize_ext_fields(ext)
                break
    else:
        ext = _normalize_ext_fields(ext)
    return RemotingCommand(code, language, version, opaque, flag, remark, ext, body, _JSON)


def _command_from_rocketmq(header: bytes, body: bytes) -> RemotingCommand:
    size = len(header)
    if size < _ROCKETMQ_FIXED_SIZE:
        raise _remote(f"malformed header: ROCKETMQ header of {size} bytes is shorter than its fixed part")
    code, language_byte, version, opaque, flag, remark_len = _ROCKETMQ_FIXED.unpack_from(header, 0)
    pos = _ROCKETMQ_FIXED.size
    if remark_len < 0 or pos + remark_len + 4 > size:
        raise _remote(f"malformed header: remark length {remark_len} out of range")
    try:
        remark = header[pos : pos + remark_len].decode("utf-8") if remark_len else None
        pos += remark_len
        (ext_len,) = _INT32.unpack_from(header, pos)
        pos += 4
        if ext_len < 0 or pos + ext_len != size:
            raise _remote(f"malformed header: extFields length {ext_len} does not match the header size")
        ext_fields: dict[str, str] = {}
        while pos < size:
            if pos + 2 > size:
                raise _remote("malformed header: truncated extFields key length")
            (key_len,) = _INT16.unpack_from(header, pos)
            pos += 2
            if key_len < 0 or pos + key_len + 4 > size:
                raise _remote(f"malformed header: extFields key length {key_len} out of range")
            key = header[pos : pos + key_len].decode("utf-8")
            pos += key_len
            (val_len,) = _INT32.unpack_from(header, pos)
            pos += 4
            if val_len < 0 or pos + val_len > size:
                raise _remote(f"malformed header: extFields value length {val_len} out of range")
            ext_fields[key] = header[pos : pos + val_len].decode("utf-8")
            pos += val_len
    except UnicodeDecodeError as exc:
        raise _remote(f"malformed header: text is not UTF-8 ({exc})") from None
    language = _LANGUAGE_BY_VALUE.get(language_byte, _OTHER)
    return RemotingCommand(code, language, version, opaque, flag, remark, ext_fields, body, _ROCKETMQ)


# ---------------------------------------------------------------------------------------------
# Header encoding


def _check_ext_fields(ext_fields: dict[str, str]) -> None:
    for key, value in ext_fields.items():
        if type(value) is not str or type(key) is not str:
            raise LocalProtocolError(
                f"extFields[{key!r}] = {value!r}: keys and values must be str (Java sends strings only)"
            )


def _encode_rocketmq_header(cmd: RemotingCommand, opaque: int) -> bytes:
    remark = cmd.remark.encode("utf-8") if cmd.remark else b""
    parts: list[bytes] = []
    for key, value in cmd.ext_fields.items():
        key_bytes = key.encode("utf-8")
        value_bytes = value.encode("utf-8")
        parts.append(_INT16.pack(len(key_bytes)) + key_bytes + _INT32.pack(len(value_bytes)) + value_bytes)
    ext = b"".join(parts)
    try:
        fixed = _ROCKETMQ_FIXED.pack(
            cmd.code, cmd.language._value_, cmd.version, opaque, cmd.flag, len(remark)
        )
    except struct.error as exc:
        raise LocalProtocolError(f"cannot encode {cmd!r} in the ROCKETMQ header: {exc}") from exc
    return fixed + remark + _INT32.pack(len(ext)) + ext


def _json_header_py(cmd: RemotingCommand, opaque: int) -> bytes:
    """The JSON header of ``cmd`` with ``opaque``: alphabetical keys and no null fields, as
    fastjson writes RemotingCommand. Raises ``LocalProtocolError`` if it cannot be encoded."""
    fields: dict[str, object] = {
        "code": cmd.code,
        "extFields": cmd.ext_fields,
        "flag": cmd.flag,
        "language": cmd.language._name_,
        "opaque": opaque,
    }
    if cmd.remark is not None:
        fields["remark"] = cmd.remark
    fields["serializeTypeCurrentRPC"] = "JSON"
    fields["version"] = cmd.version
    try:
        return _dumps(fields)
    except (TypeError, ValueError) as exc:
        raise LocalProtocolError(f"cannot encode {cmd!r}: {exc}") from exc


# The compiled twins (_codec_c.pyx), chosen here and nowhere else; they hand whatever they do not
# handle back to the pure functions above, which stay the reference.
_command_from_json: Callable[[bytes | bytearray, bytes], RemotingCommand] = _command_from_json_py
_json_header: Callable[[RemotingCommand, int], bytes] = _json_header_py
_codec_c = load_compiled("finchmq.protocol._codec_c")
if _codec_c is not None:
    _codec_c.bind(_command_from_json_py, _json_header_py)
    _command_from_json = _codec_c.command_from_json
    _json_header = _codec_c.json_header


def encode_command(
    cmd: RemotingCommand, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE, *, opaque: int | None = None
) -> bytes:
    """One frame's bytes. Raises ``LocalProtocolError`` if it cannot be encoded or is too large."""
    head, body = encode_parts(cmd, max_frame_size, opaque)
    return head + body if body else head


def _encode_parts_py(
    cmd: RemotingCommand, max_frame_size: int, opaque: int | None = None
) -> tuple[bytes, Body]:
    """Length prefix + header, and the body, for ``transport.writelines`` without a copy.

    Raises:
        LocalProtocolError: the command cannot be encoded (bad extFields, too large).
    """
    ext_fields = cmd.ext_fields
    for value in ext_fields.values():
        if type(value) is not str:
            _check_ext_fields(ext_fields)
    if opaque is None:
        opaque = cmd.opaque
    serialize_type = cmd.serialize_type
    if serialize_type is _JSON:
        header = _json_header(cmd, opaque)
        word = 0
    elif serialize_type is _ROCKETMQ:
        header = _encode_rocketmq_header(cmd, opaque)
        word = 0x1000000
    else:
        raise LocalProtocolError(f"unknown serialize type {serialize_type!r}")
    header_len = len(header)
    body = cmd.body
    frame_size = 8 + header_len + len(body)
    if frame_size > max_frame_size:
        raise LocalProtocolError(
            f"frame of {frame_size} bytes exceeds max_frame_size={max_frame_size} (code={cmd.code})"
        )
    if header_len > 0xFFFFFF:
        raise LocalProtocolError(f"header of {header_len} bytes exceeds the 24-bit header length")
    return _PREFIX.pack(frame_size - 4, word | header_len) + header, body


# ``encode_parts(cmd, max_frame_size, opaque=None)``: ``_encode_parts_py`` or its compiled twin
# (bound at the end of this module).
encode_parts: Callable[[RemotingCommand, int, int | None], tuple[bytes, Body]] = _encode_parts_py


def decode_frame(frame: bytes, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> RemotingCommand:
    """Decode exactly one complete frame (length prefix included)."""
    codec = RemotingCodec(max_frame_size=max_frame_size)
    codec.receive_data(frame)
    cmd = codec.next_command()
    if not isinstance(cmd, RemotingCommand):
        raise RemoteProtocolError(f"incomplete frame of {len(frame)} bytes")
    codec.receive_data(b"")
    if codec.next_command() is not CLOSED:
        raise RemoteProtocolError("trailing bytes after the frame")
    return cmd


# ---------------------------------------------------------------------------------------------
# The incremental codec


class RemotingCodec:
    """Frames in, commands out; commands in, bytes out. Owns no socket."""

    __slots__ = ("_buf", "_eof", "_error", "_pos", "max_frame_size", "state")

    def __init__(self, *, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        if max_frame_size < 16:
            raise ValueError(f"max_frame_size must be >= 16, got {max_frame_size}")
        self.max_frame_size = max_frame_size
        self.state = CodecState.OPEN
        self._buf: bytes | bytearray = b""
        self._pos = 0
        self._eof = False
        self._error: ProtocolError | None = None

    @property
    def buffered(self) -> int:
        """Bytes received and not yet returned as commands."""
        return len(self._buf) - self._pos

    def receive_data(self, data: bytes | bytearray | memoryview) -> None:
        """Buffer bytes from the peer; ``b""`` marks end of input."""
        if self._error is not None:
            return  # poisoned: keep nothing, next_command raises
        if not data:
            self._eof = True
            return
        if self._eof:
            raise LocalProtocolError("received data after end of input")
        buf = self._buf
        pos = self._pos
        if pos == len(buf) and type(data) is bytes:
            # Nothing left over (the usual case): frames are sliced out of the chunk itself,
            # one copy of each body instead of two.
            self._buf = data
            self._pos = 0
            return
        if not isinstance(buf, bytearray):
            self._buf = buf = bytearray(buf[pos:])
            self._pos = 0
        elif pos:
            if pos == len(buf):
                buf.clear()
                self._pos = 0
            elif pos > _COMPACT_AFTER:
                del buf[:pos]
                self._pos = 0
        buf += data

    def next_command(self) -> RemotingCommand | Literal[Signal.NEED_DATA, Signal.CLOSED]:
        """The next complete command, ``NEED_DATA``, or ``CLOSED``.

        Raises:
            RemoteProtocolError: the peer's bytes are not a valid frame (the codec stays failed).
        """
        if self._error is not None:
            raise self._error
        buf = self._buf
        pos = self._pos
        available = len(buf) - pos
        if available < 8:
            return self._short_read(available)
        length, word = _PREFIX.unpack_from(buf, pos)
        header_len = word & 0xFFFFFF
        try:
            if not (
                0 <= word < 0x1000000  # JSON
                and _MIN_JSON_HEADER <= header_len <= length - 4
                and length + 4 <= self.max_frame_size
            ):
                self._check_prefix(length, word)
            if available < length + 4:
                return self._short_read(available)
            start = pos + 8
            body_start = start + header_len
            end = pos + 4 + length
            if type(buf) is bytes:
                body = buf[body_start:end]
            else:
                body = bytes(buf[body_start:end]) if end > body_start else b""
            self._pos = end
            if word < 0x1000000:
                return _command_from_json(buf[start:body_start], body)
            return _command_from_rocketmq(bytes(buf[start:body_start]), body)
        except ProtocolError as exc:
            raise self._fail(exc) from None
        except (ValueError, TypeError, struct.error, RecursionError) as exc:
            # Defensive: a decoder bug must still surface as a protocol error, never a crash.
            raise self._fail(_remote(f"malformed header: {exc!r}")) from exc

    def _check_prefix(self, length: int, word: int) -> None:
        """Raise for a bad length prefix; return for a valid non-JSON (ROCKETMQ) one."""
        if length < 4 or length + 4 > self.max_frame_size:
            raise _remote(
                f"frame length {length + 4} exceeds max_frame_size={self.max_frame_size}"
                if length >= 4
                else f"frame length {length} is below the minimum of 4"
            )
        serialize = (word >> 24) & 0xFF
        header_len = word & 0xFFFFFF
        if header_len > length - 4:
            raise _remote(f"header length {header_len} out of range for frame length {length}")
        if serialize == 0:
            if header_len < _MIN_JSON_HEADER:
                raise _remote(f"header length {header_len} out of range for a JSON header")
        elif serialize == 1:
            if header_len < _ROCKETMQ_FIXED_SIZE:
                raise _remote(f"header length {header_len} out of range for a ROCKETMQ header")
        else:
            raise _remote(f"unknown serialize type {serialize}")

    def _short_read(self, available: int) -> Literal[Signal.NEED_DATA, Signal.CLOSED]:
        if not self._eof:
            return NEED_DATA
        if available:
            raise self._fail(
                _remote(f"connection closed in the middle of a frame ({available} bytes buffered)")
            )
        self.state = CodecState.CLOSED
        return CLOSED

    def _fail(self, exc: ProtocolError) -> RemoteProtocolError:
        """Poison the codec with ``exc`` (as a remote error) and return what it keeps raising."""
        error = exc if isinstance(exc, RemoteProtocolError) else exc._reraise_as_remote()
        self._error = error
        self.state = CodecState.ERROR
        self._buf = b""
        self._pos = 0
        return error

    def send(self, cmd: RemotingCommand, *, opaque: int | None = None) -> bytes:
        """The bytes of one frame, with ``opaque`` instead of ``cmd.opaque`` when given.

        Raises:
            LocalProtocolError: the command cannot be encoded (bad extFields, too large).
        """
        return encode_command(cmd, self.max_frame_size, opaque=opaque)


# The compiled frame split and frame head (_codec_c.pyx): the usual JSON frame in one C call each,
# the rest handed back to the pure method and function above.
_next_command_py = RemotingCodec.next_command
if _codec_c is not None:
    _codec_c.bind_frames(_encode_parts_py, _next_command_py, NEED_DATA)
    RemotingCodec.next_command = _codec_c.next_command  # type: ignore[method-assign]
    encode_parts = _codec_c.encode_parts
