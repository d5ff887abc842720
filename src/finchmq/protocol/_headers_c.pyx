# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Compiled twin of ``headers.decode_send_fields`` for SEND_MESSAGE_V2's short keys (issue 29).

The fourteen values ``a``..``n`` are looked up once and the numbers parsed from their UTF-8 in C.
Only plain decimal numbers (``-``, digits) are parsed here; a missing required key or anything
``int()`` might read differently (spaces, ``+``, ``_``, other digits, 19+ digits) goes to the
pure decoder bound with ``bind``, which decodes it or raises exactly as without this module.
"""

from cpython.dict cimport PyDict_GetItem

cdef extern from "Python.h":
    const char* PyUnicode_AsUTF8AndSize(object text, Py_ssize_t* size) except NULL

cdef object _v2_fallback = None
cdef object _v1_decoder = None
cdef object _values_type = None
cdef object _tuple_new = tuple.__new__
cdef dict _BOOLS = {"true": True, "false": False, "1": True, "0": False}

cdef long long _INT32_MIN = -2147483648
cdef long long _INT32_MAX = 2147483647


def bind(v2_fallback, v1_decoder, values_type):
    """The pure V2 and V1 decoders (``values_from_ext_fields``) and ``SendMessageFields``."""
    global _v2_fallback, _v1_decoder, _values_type
    _v2_fallback = v2_fallback
    _v1_decoder = v1_decoder
    _values_type = values_type


cdef inline bint _number(object text, long long* out, bint int32):
    """A plain decimal in ``text`` (a str); false to hand back."""
    cdef Py_ssize_t size, i = 0
    cdef const char* p
    cdef bint negative = False
    cdef long long n = 0
    if type(text) is not str:
        return False
    try:
        p = PyUnicode_AsUTF8AndSize(text, &size)
    except UnicodeEncodeError:
        return False
    if size > 0 and p[0] == 45:
        negative = True
        i = 1
    if size - i < 1 or size - i > 18:
        return False
    while i < size:
        if not (48 <= p[i] <= 57):
            return False
        n = n * 10 + (p[i] - 48)
        i += 1
    if negative:
        n = -n
    if int32 and not (_INT32_MIN <= n <= _INT32_MAX):
        return False
    out[0] = n
    return True


cdef inline object _get(dict fields, str key):
    cdef void* value = PyDict_GetItem(fields, key)
    return None if value == NULL else <object>value


cdef inline object _flag(object value):
    """A bool field as the pure decoder reads it (None: the default, False)."""
    if value is None:
        return False
    b = _BOOLS.get(value)
    if b is not None:
        return b
    return value.lower() == "true"


def decode_send_fields(fields, *, short_keys):
    """``headers.decode_send_fields``."""
    cdef long long d, e, f, g, h, j = 0, l = 0
    cdef dict ext
    if not short_keys:
        return _v1_decoder(fields)
    if type(fields) is not dict:
        return _v2_fallback(fields)
    ext = <dict>fields
    a = _get(ext, "a")
    b = _get(ext, "b")
    c = _get(ext, "c")
    vi = _get(ext, "i")
    vj = _get(ext, "j")
    vk = _get(ext, "k")
    vl = _get(ext, "l")
    vm = _get(ext, "m")
    vn = _get(ext, "n")
    if (
        a is None or b is None or c is None
        or not _number(_get(ext, "d"), &d, True) or not _number(_get(ext, "e"), &e, True)
        or not _number(_get(ext, "f"), &f, True) or not _number(_get(ext, "g"), &g, False)
        or not _number(_get(ext, "h"), &h, True)
        or (vj is not None and not _number(vj, &j, True))
        or (vl is not None and not _number(vl, &l, True))
        or (vk is not None and type(vk) is not str) or (vm is not None and type(vm) is not str)
    ):
        return _v2_fallback(fields)
    return _tuple_new(
        _values_type,
        (
            a, b, c, d, e, f, g, h, vi,
            None if vj is None else j,
            _flag(vk),
            None if vl is None else l,
            _flag(vm),
            vn,
        ),
    )
