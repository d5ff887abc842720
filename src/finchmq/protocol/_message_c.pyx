# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Compiled twin of ``message.py``'s property-string parse (issue 29).

The text is walked once as UTF-8 (``\\x01`` and ``\\x02`` are single bytes there and never part of
a longer sequence), and only the names and values become Python objects: no list of segments and
no partition tuples. A text UTF-8 cannot hold (a lone surrogate) is handed back to the pure
function bound with ``bind``; tests/protocol/test_compiled.py demands the same dict from both.
"""

from cpython.unicode cimport PyUnicode_DecodeUTF8


cdef extern from "Python.h":
    const char* PyUnicode_AsUTF8AndSize(object text, Py_ssize_t* size) except NULL


cdef object _fallback = None


def bind(fallback):
    """The pure ``string_to_properties`` this module hands the unusual to."""
    global _fallback
    _fallback = fallback


def string_to_properties(text):
    """``message.string_to_properties``: Java's ``string2messageProperties``."""
    cdef Py_ssize_t size
    cdef const char* data
    cdef Py_ssize_t start = 0, i = 0, sep
    cdef dict result = {}
    if type(text) is not str:
        return _fallback(text)
    try:
        data = PyUnicode_AsUTF8AndSize(text, &size)
    except UnicodeEncodeError:
        return _fallback(text)
    while start <= size:
        # one segment: [start, i) up to the next \x02 or the end
        i = start
        sep = -1
        while i < size and data[i] != 2:
            if data[i] == 1 and sep < 0:
                sep = i
            i += 1
        if sep > start and i > sep + 1:  # a name and a value, both non-empty
            result[PyUnicode_DecodeUTF8(data + start, sep - start, NULL)] = PyUnicode_DecodeUTF8(
                data + sep + 1, i - sep - 1, NULL
            )
        start = i + 1
    return result
