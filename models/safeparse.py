"""Parsing TOML and JSON from user files into one-line errors, whatever the bytes hold.

The standard parsers refuse bad syntax with their own error types, but a hostile or damaged file
reaches three more: ``ValueError`` for an integer of more than 4300 digits (Python's
int-to-string limit), ``RecursionError`` for brackets nested a few thousand deep, and
``UnicodeDecodeError`` for bytes that are not UTF-8. Every reader of a user file parses through
:func:`toml_loads` / :func:`json_loads` here, so each of those becomes the reader's own error
class with a message that names the file, the problem and the fix, on one line.
"""

from __future__ import annotations

import json
import re
import tomllib

__all__ = ["decode_utf8", "toml_loads", "json_loads", "read_json", "one_line"]


def one_line(text: object, limit: int = 300) -> str:
    """``text`` with every run of whitespace (newlines too) folded to one space, at most ``limit`` chars."""
    s = " ".join(str(text).split())
    return s if len(s) <= limit else s[: limit - 3] + "..."


def decode_utf8(data: bytes, where: str, error: type[Exception], what: str = "file") -> str:
    """``data`` as UTF-8 text (a leading BOM is dropped); ``error`` naming the first bad byte."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise error(f"{where}: not UTF-8 text (bad byte at offset {e.start}); save the {what} as UTF-8") from None


def _huge_int_key(text: str) -> str | None:
    """The key (JSON ``"key":`` or TOML ``key =``) just before the first run of over 4300 digits."""
    m = re.search(r"\d{4301}", text)
    if not m:
        return None
    before = text[max(0, m.start() - 300):m.start()]
    keys = re.findall(r"""["']?([A-Za-z0-9_.\-]{1,100})["']?\s*[:=]\s*[-+]?$""", before)
    return keys[-1] if keys else None


def _parse(loads, text: str, where: str, error: type[Exception], what: str, lang: str):
    try:
        return loads(text)
    except (RecursionError, MemoryError):
        raise error(f"{where}: brackets or tables nested too deeply to read; flatten the {what}") from None
    except ValueError as e:  # TOMLDecodeError / JSONDecodeError, and the 4300-digit integer limit
        msg = str(e)
        if "integer string conversion" in msg:
            key = _huge_int_key(text)
            field = f"field {key!r} " if key else ""
            raise error(f"{where}: {field}holds an integer of more than 4300 digits; write a sensible number") \
                from None
        raise error(f"{where}: not valid {lang} ({one_line(msg)}); fix the syntax there") from None


def toml_loads(text: str | bytes, where: str, error: type[Exception], what: str = "file") -> dict:
    """Parse TOML ``text`` (bytes are decoded as UTF-8); every failure is one ``error`` line."""
    if isinstance(text, bytes):
        text = decode_utf8(text, where, error, what)
    return _parse(tomllib.loads, text, where, error, what, "TOML")


def json_loads(text: str | bytes, where: str, error: type[Exception], what: str = "file"):
    """Parse JSON ``text`` (bytes are decoded as UTF-8); every failure is one ``error`` line."""
    if isinstance(text, bytes):
        text = decode_utf8(text, where, error, what)
    return _parse(json.loads, text, where, error, what, "JSON")


def read_json(path, what: str = "file", error: type[Exception] | None = None, limit: int = 64 << 20):
    """The JSON file at ``path`` (a user file: any bytes), through :func:`json_loads`; one ``error`` line
    (default :class:`~hwcosim.models.errors.UsageError`) for a file that cannot be read, is over
    ``limit`` bytes, is not UTF-8 or valid JSON, or is nested too deeply."""
    from pathlib import Path

    if error is None:
        from hwcosim.models.errors import UsageError as error
    path = Path(path)
    try:
        if path.stat().st_size > limit:
            raise error(f"{path}: over {limit >> 20} MiB, larger than any {what} hwcosim writes; give the file it "
                        "wrote")
        data = path.read_bytes()
    except OSError as e:
        raise error(f"{path}: cannot read it ({e.strerror or e})") from None
    return json_loads(data, str(path), error, what)
