"""Keys derived from fields of a JSON payload, as the server derives them for
a queue's ``key_fields``: the canonical JSON (RFC 8785, JCS) of the array of
the values that the JSON pointers (RFC 6901) name, such as
``["acc-123",100]``.

The same algorithm as the server's (Go, ``internal/jsonkey``), byte for byte,
with the same error messages; the two share their test vectors
(``internal/jsonkey/testdata/vectors.json``). The parser is iterative, so it
accepts arrays and objects nested 10000 deep, as the server does.
"""

from __future__ import annotations

import re
from typing import List, Optional, Tuple, Union

from .errors import InvalidFieldError

__all__ = ["DeriveKeyError", "derive_key"]

#: The deepest nesting of arrays and objects accepted, as on the server.
MAX_DEPTH = 10000


class DeriveKeyError(InvalidFieldError, ValueError):
    """No key could be derived: a key field names nothing in the payload, is
    not a JSON pointer, or (``pointer == ""``) the payload is not a JSON
    object (I-JSON). The message is the server's (its ``INVALID_FIELD``
    answer for the same job), naming the pointer; ``metadata["pointer"]``
    holds it too."""

    def __init__(self, pointer: str, reason: str) -> None:
        message = f"payload: {reason}" if pointer == "" else f"field {_quote(pointer)}: {reason}"
        super().__init__(message, metadata={"pointer": pointer})
        #: The key field at fault, or ``""`` when the payload itself is.
        self.pointer: str = pointer
        #: What is wrong, without the pointer.
        self.detail: str = reason


# Values: None, True, False, str, _Num (the literal), list, _Obj.
class _Num:
    __slots__ = ("literal",)

    def __init__(self, literal: str) -> None:
        self.literal = literal


class _Obj:
    __slots__ = ("members",)

    def __init__(self) -> None:
        self.members: List[Tuple[str, object]] = []


def _kind(v: object) -> str:
    if v is None:
        return "null"
    if v is True or v is False:
        return "a boolean"
    if isinstance(v, _Num):
        return "a number"
    if isinstance(v, str):
        return "a string"
    if isinstance(v, list):
        return "an array"
    return "an object"


def _valid(s: str) -> str:
    """s with lone surrogates replaced by U+FFFD, as Go's ToValidUTF8."""
    if all(not 0xD800 <= ord(c) < 0xE000 for c in s):
        return s
    return "".join("\ufffd" if 0xD800 <= ord(c) < 0xE000 else c for c in s)


_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}
_NEEDS_ESCAPE = re.compile(r'["\\\x00-\x1f]')


def _escape(m: "re.Match[str]") -> str:
    c = m.group()
    return _ESCAPES.get(c) or "\\u%04x" % ord(c)


def _string(s: str) -> str:
    """s quoted as ECMAScript's JSON.stringify does: \\b \\t \\n \\f \\r \\"
    \\\\, other control characters as \\u00xx (lowercase hex), everything
    else (U+007F, U+2028, U+2029, non-ASCII) as it is."""
    return '"' + _NEEDS_ESCAPE.sub(_escape, s) + '"'


def _quote(s: str) -> str:
    return _string(_valid(s))


def _quote_list(pointers: List[str]) -> str:
    b = ("[" + ",".join(_quote(p) for p in pointers)).encode("utf-8")
    if len(b) > 300:
        # Messages stay readable when the pointers are long.
        return b[:300].decode("utf-8", "ignore") + "…"
    return b.decode("utf-8") + "]"


def _pointer_of(tokens: List[str]) -> str:
    return "".join("/" + t.replace("~", "~0").replace("/", "~1") for t in tokens)


class _SyntaxError(Exception):
    def __init__(self, msg: str, offset: int) -> None:
        super().__init__(msg)
        self.msg = msg
        self.offset = offset


_SIMPLE_ESCAPES = {
    ord('"'): '"',
    ord("\\"): "\\",
    ord("/"): "/",
    ord("b"): "\b",
    ord("f"): "\f",
    ord("n"): "\n",
    ord("r"): "\r",
    ord("t"): "\t",
}
_PLAIN = re.compile(rb'[^"\\\x00-\x1f]*')
_HEX4 = re.compile(rb"[0-9a-fA-F]{4}")
_DIGITS = re.compile(rb"[0-9]*")
_SPACE = re.compile(rb"[ \t\n\r]*")


class _Parser:
    """RFC 8259 text in UTF-8 that must also be I-JSON (RFC 7493): no
    duplicate member names, no lone surrogates, no invalid UTF-8. Iterative,
    so deep nesting costs no Python stack."""

    def __init__(self, data: bytes) -> None:
        self.d = data
        self.pos = 0
        self.depth = 0
        self.path: List[str] = []

    def fail(self, msg: str) -> "_SyntaxError":
        return _SyntaxError(msg, self.pos)

    def describe(self) -> str:
        if self.pos >= len(self.d):
            return "end of input"
        c = self.d[self.pos]
        if 0x20 <= c < 0x7F:
            ch = chr(c)
            if ch == "'":
                return "character '\\''"
            if ch == "\\":
                return "character '\\\\'"
            return f"character '{ch}'"
        return "byte 0x%x" % c

    def skip_space(self) -> None:
        self.pos = _SPACE.match(self.d, self.pos).end()  # type: ignore[union-attr]

    def at(self, c: int) -> bool:
        return self.pos < len(self.d) and self.d[self.pos] == c

    def enter(self) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise self.fail(f"arrays and objects nested more than {MAX_DEPTH} deep")

    def document(self) -> object:
        self.skip_space()
        v = self.value()
        self.skip_space()
        if self.pos < len(self.d):
            raise self.fail(f"unexpected {self.describe()} after the JSON value")
        return v

    def member_name(self, obj: _Obj, seen: set) -> None:
        """Reads `"name" :` of a member of obj and pushes the name on path."""
        self.skip_space()
        if not self.at(0x22):
            raise self.fail(f"unexpected {self.describe()}, expected a member name in double quotes")
        start = self.pos
        name = self.string()
        if name in seen:
            self.pos = start
            raise self.fail(
                f"duplicate member name {_quote(name)} in the object at {_quote(_pointer_of(self.path))}"
                " (I-JSON, which RFC 8785 requires, forbids them)"
            )
        seen.add(name)
        self.skip_space()
        if not self.at(0x3A):
            raise self.fail(f"unexpected {self.describe()}, expected ':' after a member name")
        self.pos += 1
        self.skip_space()
        self.path.append(name)

    def value(self) -> object:
        d = self.d
        # Open containers: (the list or _Obj, the names seen in an object).
        stack: List[Tuple[Union[list, _Obj], Optional[set]]] = []
        while True:
            # A value starts at self.pos.
            if self.pos >= len(d):
                raise self.fail("unexpected end of input, expected a JSON value")
            c = d[self.pos]
            v: object
            if c == 0x7B:  # {
                self.enter()
                self.pos += 1
                self.skip_space()
                obj = _Obj()
                if self.at(0x7D):
                    self.pos += 1
                    self.depth -= 1
                    v = obj
                else:
                    seen: set = set()
                    stack.append((obj, seen))
                    self.member_name(obj, seen)
                    continue
            elif c == 0x5B:  # [
                self.enter()
                self.pos += 1
                self.skip_space()
                arr: list = []
                if self.at(0x5D):
                    self.pos += 1
                    self.depth -= 1
                    v = arr
                else:
                    stack.append((arr, None))
                    self.skip_space()
                    self.path.append("0")
                    continue
            elif c == 0x22:
                v = self.string()
            elif c == 0x2D or 0x30 <= c <= 0x39:
                v = self.number()
            elif c == 0x74:
                v = self.literal(b"true", True)
            elif c == 0x66:
                v = self.literal(b"false", False)
            elif c == 0x6E:
                v = self.literal(b"null", None)
            else:
                raise self.fail(f"unexpected {self.describe()}, expected a JSON value")
            # v is complete: add it to the containers it closes.
            while True:
                if not stack:
                    return v
                container, seen_names = stack[-1]
                if isinstance(container, _Obj):
                    container.members.append((self.path.pop(), v))
                    close, what = 0x7D, "',' or '}' in an object"
                else:
                    container.append(v)
                    self.path.pop()
                    close, what = 0x5D, "',' or ']' in an array"
                self.skip_space()
                if self.at(0x2C):
                    self.pos += 1
                    if isinstance(container, _Obj):
                        assert seen_names is not None
                        self.member_name(container, seen_names)
                    else:
                        self.skip_space()
                        self.path.append(str(len(container)))
                    break
                if self.at(close):
                    self.pos += 1
                    self.depth -= 1
                    stack.pop()
                    v = container
                    continue
                raise self.fail(f"unexpected {self.describe()}, expected {what}")

    def literal(self, word: bytes, v: object) -> object:
        if not self.d.startswith(word, self.pos):
            raise self.fail(f"unexpected {self.describe()}, expected a JSON value")
        self.pos += len(word)
        return v

    def number(self) -> _Num:
        d = self.d
        start = i = self.pos
        if i < len(d) and d[i] == 0x2D:
            i += 1
        if i < len(d) and d[i] == 0x30:
            i += 1
        elif i < len(d) and 0x31 <= d[i] <= 0x39:
            i = _DIGITS.match(d, i).end()  # type: ignore[union-attr]
        else:
            self.pos = i
            raise self.fail(f"unexpected {self.describe()} in a number, expected a digit")
        if i < len(d) and d[i] == 0x2E:
            i += 1
            j = _DIGITS.match(d, i).end()  # type: ignore[union-attr]
            if j == i:
                self.pos = i
                raise self.fail(f"unexpected {self.describe()} in a number, expected a digit after '.'")
            i = j
        if i < len(d) and d[i] in (0x65, 0x45):
            i += 1
            if i < len(d) and d[i] in (0x2B, 0x2D):
                i += 1
            j = _DIGITS.match(d, i).end()  # type: ignore[union-attr]
            if j == i:
                self.pos = i
                raise self.fail(f"unexpected {self.describe()} in a number, expected a digit in the exponent")
            i = j
        self.pos = i
        return _Num(d[start:i].decode("ascii"))

    def string(self) -> str:
        """Decodes a string literal; self.pos is at its opening quote."""
        d = self.d
        self.pos += 1
        parts: List[str] = []
        while True:
            end = _PLAIN.match(d, self.pos).end()  # type: ignore[union-attr]
            if end > self.pos:
                try:
                    parts.append(d[self.pos : end].decode("utf-8"))
                except UnicodeDecodeError as e:
                    self.pos += e.start
                    raise self.fail("invalid UTF-8 in a string") from None
                self.pos = end
            if self.pos >= len(d):
                raise self.fail("unexpected end of input in a string")
            c = d[self.pos]
            if c == 0x22:
                self.pos += 1
                return "".join(parts)
            if c == 0x5C:
                parts.append(self.escape())
                continue
            raise self.fail(f"control character 0x{c:x} in a string (write it as an escape like \\n or \\u001f)")

    def escape(self) -> str:
        """Decodes one escape at self.pos (a backslash), joining a surrogate
        pair written as two \\u escapes."""
        d = self.d
        if self.pos + 1 >= len(d):
            self.pos += 1
            raise self.fail("unexpected end of input in a string")
        c = d[self.pos + 1]
        simple = _SIMPLE_ESCAPES.get(c)
        if simple is not None:
            self.pos += 2
            return simple
        if c == 0x75:  # u
            if not _HEX4.match(d, self.pos + 2):
                self.pos += 2
                raise self.fail("invalid \\u escape in a string, expected four hex digits")
            r = int(d[self.pos + 2 : self.pos + 6], 16)
            if 0xD800 <= r < 0xDC00:
                if d[self.pos + 6 : self.pos + 8] == b"\\u" and _HEX4.match(d, self.pos + 8):
                    r2 = int(d[self.pos + 8 : self.pos + 12], 16)
                    if 0xDC00 <= r2 < 0xE000:
                        self.pos += 12
                        return chr(0x10000 + ((r - 0xD800) << 10) + (r2 - 0xDC00))
                raise self.fail(f"lone surrogate \\u{r:x} in a string (I-JSON forbids it)")
            if 0xDC00 <= r < 0xE000:
                raise self.fail(f"lone surrogate \\u{r:x} in a string (I-JSON forbids it)")
            self.pos += 6
            return chr(r)
        self.pos += 1
        ch = "\ufffd"
        for n in range(1, 5):
            try:
                ch = d[self.pos : self.pos + n].decode("utf-8")
                break
            except UnicodeDecodeError:
                continue
        raise self.fail(f"invalid escape \\{ch} in a string")


class _NotFinite(Exception):
    def __init__(self, literal: str) -> None:
        super().__init__(literal)
        self.literal = literal


def _number(literal: str) -> str:
    """The literal's IEEE-754 double as ECMAScript's Number.prototype.toString
    writes it (RFC 8785 section 3.2.2.3): the shortest decimal that reads back
    as the double, plain for 1e-7 <= |x| < 1e21, with an exponent otherwise;
    -0 is "0"."""
    f = float(literal)  # correctly rounded; overflow gives inf, underflow 0
    if f != f or f in (float("inf"), float("-inf")):
        raise _NotFinite(literal)
    if f == 0:
        return "0"
    sign = "-" if f < 0 else ""
    # repr is the shortest round trip too, in Python's notation ("1e-07",
    # "100.0", "1.5e+300"): take its digits and the decimal point's place.
    r = repr(abs(f))
    mant, _, exp = r.partition("e")
    whole, _, frac = mant.partition(".")
    digits = whole + frac
    n = len(whole) + (int(exp) if exp else 0)  # the point sits after n digits
    stripped = digits.lstrip("0")
    n -= len(digits) - len(stripped)
    digits = stripped.rstrip("0")
    k = len(digits)
    if k <= n <= 21:
        out = digits + "0" * (n - k)
    elif 0 < n <= 21:
        out = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        out = "0." + "0" * -n + digits
    else:
        e = n - 1
        out = digits[0] + ("." + digits[1:] if k > 1 else "") + "e" + ("+" if e >= 0 else "-") + str(abs(e))
    return sign + out


def _utf16_key(member: Tuple[str, object]) -> bytes:
    # UTF-16BE bytes compare as the code units do (RFC 8785 section 3.2.3).
    return member[0].encode("utf-16-be")


def _canonical(v: object) -> str:
    """The RFC 8785 serialization of v, without recursion."""
    out: List[str] = []
    # Open containers: [the iterator over what is left, the closing bracket,
    # whether the next item is the first].
    stack: List[list] = []
    while True:
        if isinstance(v, list):
            out.append("[")
            stack.append([iter(v), "]", True])
        elif isinstance(v, _Obj):
            out.append("{")
            stack.append([iter(sorted(v.members, key=_utf16_key)), "}", True])
        elif v is None:
            out.append("null")
        elif v is True:
            out.append("true")
        elif v is False:
            out.append("false")
        elif isinstance(v, _Num):
            out.append(_number(v.literal))
        else:
            assert isinstance(v, str)
            out.append(_string(v))
        while stack:
            top = stack[-1]
            item = next(top[0], _END)
            if item is _END:
                out.append(top[1])
                stack.pop()
                continue
            if not top[2]:
                out.append(",")
            top[2] = False
            if top[1] == "}":
                name, v = item  # type: ignore[misc]
                out.append(_string(name))
                out.append(":")
            else:
                v = item
            break
        else:
            return "".join(out)


_END = object()


def _check_pointer(p: str) -> Optional[str]:
    """Why p is not a JSON pointer (RFC 6901), or None when it is."""
    if p == "":
        return None
    if not p.startswith("/"):
        return 'it must start with "/"'
    for i, c in enumerate(p):
        if c == "~" and p[i + 1 : i + 2] not in ("0", "1"):
            return '"~" must be written "~0", and "/" inside a name "~1"'
    return None


_INDEX = re.compile(r"0|[1-9][0-9]*")


def _array_index(token: str, n: int) -> Union[int, str]:
    if token == "-":
        return '"-" names the element after the last one, which never exists; name an index from 0'
    if not _INDEX.fullmatch(token):
        return f"{_quote(token)} is not an array index (a decimal number without leading zeros, from 0)"
    i = int(token)
    if i >= n:
        return f"not in the payload (there is no element {token})"
    return i


class _Missing:
    def __init__(self, why: str) -> None:
        self.why = why


def _resolve(doc: object, p: str) -> object:
    """The value the valid pointer p names in doc (RFC 6901 section 4), or a
    _Missing saying why there is none."""
    if p == "":
        return doc
    v = doc
    at = 0  # p[:at] is the pointer of v
    for raw in p[1:].split("/"):
        token = raw.replace("~1", "/").replace("~0", "~")
        parent = p[:at]
        if isinstance(v, _Obj):
            for name, member in v.members:
                if name == token:
                    v = member
                    break
            else:
                if parent == "":
                    return _Missing("not in the payload")
                return _Missing(f"not in the payload (the object at {_quote(parent)} has no member {_quote(token)})")
        elif isinstance(v, list):
            i = _array_index(token, len(v))
            if isinstance(i, str):
                return _Missing(f"{i} ({_quote(parent)} is an array of {len(v)})")
            v = v[i]
        else:
            return _Missing(f"not in the payload ({_quote(parent)} is {_kind(v)}, which has no members or elements)")
        at += 1 + len(raw)
    return v


def derive_key(payload: Union[bytes, bytearray, memoryview, str], *fields: str) -> str:
    """The idempotency key that a queue with ``key_fields = fields`` derives
    from ``payload``, the same key the server gives a job enqueued without
    one: the canonical JSON (RFC 8785) of the array of the values the JSON
    pointers (RFC 6901) name::

        >>> derive_key(b'{"amount": 100, "account": "acc-123"}', "/account", "/amount")
        '["acc-123",100]'

    The payload (bytes, or text that is encoded as UTF-8) must be one JSON
    object that is I-JSON: valid UTF-8, no duplicate member names, no lone
    surrogates. Numbers count as IEEE-754 doubles, so ``100``, ``100.0`` and
    ``1e2`` give the same key and integers beyond 2**53 are rounded (send
    those as strings).

    Raises:
        DeriveKeyError: (a ``ValueError`` and an :class:`InvalidFieldError`)
            with the server's message, naming the field at fault in
            ``.pointer`` (``""`` when the payload itself is).
    """
    pointers = list(fields)
    for p in pointers:
        if not isinstance(p, str):
            raise TypeError(f"derive_key: key fields are JSON pointers (str), got {type(p).__name__}")
    if not pointers:
        raise DeriveKeyError("", 'no key_fields to derive an idempotency key from; list JSON pointers like ["/account", "/amount"]')
    # Pointers are checked before the payload: a bad pointer is the
    # configuration's fault, whatever the job carries.
    for p in pointers:
        why = _check_pointer(p)
        if why is not None:
            raise DeriveKeyError(p, f'is not a JSON pointer (RFC 6901): {why}; write it like "/account" or "/order/id"')
    advice = "the queue derives its idempotency key from key_fields " + _quote_list(pointers)
    need_object = f"; {advice}, so every job needs a JSON object payload holding them, or an explicit key"
    if isinstance(payload, str):
        try:
            data = payload.encode("utf-8")
        except UnicodeEncodeError:
            raise DeriveKeyError(
                "", "is not valid JSON (I-JSON, RFC 7493): it holds a lone surrogate, which has no UTF-8" + need_object
            ) from None
    elif isinstance(payload, (bytes, bytearray, memoryview)):
        data = bytes(payload)
    else:
        raise TypeError(f"derive_key: the payload is bytes or str, got {type(payload).__name__}")
    if not data:
        raise DeriveKeyError("", "is empty, not a JSON object" + need_object)
    try:
        doc = _Parser(data).document()
    except _SyntaxError as e:
        raise DeriveKeyError("", f"is not valid JSON (I-JSON, RFC 7493): {e.msg} at byte offset {e.offset}{need_object}") from None
    if not isinstance(doc, _Obj):
        raise DeriveKeyError("", f"is {_kind(doc)}, not a JSON object{need_object}")
    parts = []
    for p in pointers:
        v = _resolve(doc, p)
        if isinstance(v, _Missing):
            raise DeriveKeyError(p, f"{v.why}; {advice}, so every job needs them, or send an explicit key")
        try:
            parts.append(_canonical(v))
        except _NotFinite as e:
            raise DeriveKeyError(
                p,
                f"the number {e.literal} is beyond the range of IEEE-754 doubles, which RFC 8785 numbers are;"
                " send a number within ±1.7976931348623157e308 (or the value as a string), or an explicit key",
            ) from None
    return "[" + ",".join(parts) + "]"
