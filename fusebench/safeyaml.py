"""A strict YAML loader for files a user or another host hands us (the case file).

PyYAML's ``safe_load`` builds no Python objects, but it still follows YAML 1.1: anchors and
aliases (a nine-level alias "bomb" expands to billions of items once printed or walked), a
duplicate key silently wins, and unquoted ``0x16``, ``010``, ``1_000``, ``1:30`` or ``yes`` are
read as 22, 8, 1000, 90 and True. :func:`load` refuses all of them, and files larger or deeper
than a case file needs, each as one :class:`StrictYAMLError` line quoting what was written.
"""

from __future__ import annotations

import re

import yaml
from yaml.events import AliasEvent

#: A case file is a few KB; anything larger is not one.
MAX_BYTES = 1 << 20
#: Mappings and lists nested deeper than this are refused (the case file needs 5).
MAX_DEPTH = 16
#: The most digits an integer is converted with: no setting takes more. A longer one is kept as
#: its text, never converted (5000 digits raised ValueError), which the case file's checks then
#: refuse, naming its key.
MAX_INT_DIGITS = 19

_DECIMAL_INT = re.compile(r"[-+]?(0|[1-9][0-9]*)")
_DECIMAL_FLOAT = re.compile(r"[-+]?([0-9]+\.[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?")
_SPECIAL_FLOAT = re.compile(r"[-+]?\.(inf|Inf|INF)|\.(nan|NaN|NAN)")


class StrictYAMLError(ValueError):
    """The text is not the plain YAML :func:`load` accepts; the message is one line, with the line
    and column and the text as written (cut)."""


def quote(text: object, limit: int = 40) -> str:
    """``text`` as written, in quotes, cut to ``limit`` characters and to its first line."""
    s = str(text)
    first = s.splitlines()[0] if s else s
    cut = first[:limit] + ("..." if len(first) > limit or first != s else "")
    return repr(cut)


def _where(node_or_event) -> str:
    mark = node_or_event.start_mark
    return f"line {mark.line + 1}, column {mark.column + 1}"


class _Loader(yaml.SafeLoader):
    """SafeLoader that refuses anchors, aliases, duplicate keys, non-decimal numbers and YAML 1.1
    booleans, and nesting deeper than :data:`MAX_DEPTH`."""

    _depth = 0

    def compose_node(self, parent, index):
        event = self.peek_event()
        if isinstance(event, AliasEvent) or getattr(event, "anchor", None) is not None:
            sign = "*" if isinstance(event, AliasEvent) else "&"
            raise StrictYAMLError(f"{_where(event)}: anchors and aliases are not accepted "
                                  f"({sign}{quote(event.anchor)[1:-1]}); write the value out")
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise StrictYAMLError(f"{_where(event)}: nested deeper than {MAX_DEPTH} levels")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node, deep=False):
        seen = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.get(key)
            except TypeError:
                raise StrictYAMLError(f"{_where(key_node)}: a key must be a plain value") from None
            if first is not None:
                raise StrictYAMLError(f"{_where(key_node)}: duplicate key {quote(key_node.value)} (first "
                                      f"at {first}); each key may appear once")
            seen[key] = _where(key_node)
        return super().construct_mapping(node, deep=deep)

    def construct_yaml_int(self, node):
        if not _DECIMAL_INT.fullmatch(node.value):
            raise StrictYAMLError(f"{_where(node)}: {quote(node.value)} is a YAML 1.1 non-decimal "
                                  "number (hex, octal, binary, '_' or ':'); write it in decimal, or "
                                  "quote it if it is text")
        if len(node.value.lstrip("+-")) > MAX_INT_DIGITS:
            return node.value
        return super().construct_yaml_int(node)

    def construct_yaml_float(self, node):
        if not (_DECIMAL_FLOAT.fullmatch(node.value) or _SPECIAL_FLOAT.fullmatch(node.value)):
            raise StrictYAMLError(f"{_where(node)}: {quote(node.value)} is a YAML 1.1 number form "
                                  "('_' or ':'); write it as a plain decimal, or quote it if it is text")
        return super().construct_yaml_float(node)

    def construct_yaml_bool(self, node):
        if node.value.lower() not in ("true", "false"):
            raise StrictYAMLError(f"{_where(node)}: {quote(node.value)} is read as a YAML 1.1 boolean; "
                                  "write true or false, or quote it if it is text")
        return super().construct_yaml_bool(node)


_Loader.add_constructor("tag:yaml.org,2002:int", _Loader.construct_yaml_int)
_Loader.add_constructor("tag:yaml.org,2002:float", _Loader.construct_yaml_float)
_Loader.add_constructor("tag:yaml.org,2002:bool", _Loader.construct_yaml_bool)
_Loader.add_constructor("tag:yaml.org,2002:map", _Loader.construct_yaml_map)


def _control(exc: "yaml.reader.ReaderError") -> StrictYAMLError:
    """A character YAML does not allow (a NUL byte was exit 1 with no file named: issue 42)."""
    code = exc.character if isinstance(exc.character, int) else ord(exc.character)
    return StrictYAMLError(f"not valid YAML (character {exc.position + 1}): character #x{code:04x} is "
                           "not allowed in YAML (a NUL or other control byte)")


def load(text: str):
    """``text`` parsed as one YAML document by the strict rules of this module.

    Raises:
        StrictYAMLError: larger than :data:`MAX_BYTES`, not YAML, or a construct refused here;
            one line.
    """
    if len(text.encode("utf-8", "surrogatepass")) > MAX_BYTES:
        raise StrictYAMLError(f"larger than {MAX_BYTES // 1024} KB; a case file is a few KB")
    try:
        loader = _Loader(text)  # reads the first characters: a NUL byte there is refused here
    except yaml.reader.ReaderError as exc:
        raise _control(exc) from None
    try:
        return loader.get_single_data()
    except yaml.reader.ReaderError as exc:  # a control byte further on
        raise _control(exc) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        problem = getattr(exc, "problem", None) or (str(exc).splitlines() or ["?"])[0]
        raise StrictYAMLError(f"not valid YAML{where}: {problem}") from None
    except RecursionError:
        raise StrictYAMLError(f"nested deeper than {MAX_DEPTH} levels") from None
    finally:
        loader.dispose()
