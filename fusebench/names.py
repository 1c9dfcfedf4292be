"""Names chosen on the command line or in a case file (ops, backends, dtypes, shapes), each checked
against the valid ones: a leaf, so that the harness and the command line share one rule.

An unknown name is refused (never silently respelled: ``GELU`` is not ``gelu`` to asv or to the
results), with the closest valid name offered where one is close (:func:`did_you_mean`)."""

from __future__ import annotations

import difflib

from fusebench.errors import UsageError

#: Spellings of a dtype that other tools use, offered as the dtype they mean.
ALIASES = {"fp32": "float32", "f32": "float32", "float": "float32", "fp16": "float16",
           "f16": "float16", "half": "float16", "bf16": "bfloat16", "bfloat": "bfloat16"}
#: How close (difflib's ratio) a name must be to a valid one to be offered: one letter off in a
#: word of six (``softmx``); ``relu`` is not offered ``gelu`` (0.75), another op, not a typo.
CLOSE = 0.8


def _folded(name: str) -> str:
    return name.lower().replace("-", "").replace("_", "").replace("*", "x").replace(" ", "")


def closest(name: str, valid) -> str | None:
    """The valid name ``name`` most likely meant, or None: the same name but for case, ``-``,
    ``_`` and ``*`` for ``x`` (``GELU``, ``4096*4096``), a known alias (``bf16``), else the nearest
    one by difflib's ratio of at least :data:`CLOSE`."""
    valid = [str(v) for v in valid]
    folded = {_folded(v): v for v in valid}
    key = _folded(name)
    if key in folded:
        return folded[key]
    if ALIASES.get(key) in valid:
        return ALIASES[key]
    near = difflib.get_close_matches(key, list(folded), n=1, cutoff=CLOSE)
    return folded[near[0]] if near else None


def did_you_mean(name: str, valid) -> str:
    """`` (did you mean gelu?)`` for :func:`closest`'s answer, else the empty string: put right
    after the refused name in a message."""
    best = closest(name, valid)
    return f" (did you mean {best}?)" if best is not None and best != name else ""


def items(kind: str, text: str, valid: str = "") -> list[str]:
    """The items of a comma-separated list (``eager,torch``), each stripped.

    Raises:
        UsageError: an empty item (``eager,,torch``, a comma at an end) or nothing named
            (``","``): one line, ending with ``valid`` (what may be named) when given.
    """
    chosen = [n.strip() for n in text.split(",")]
    tail = f"; {valid}" if valid else ""
    if not any(chosen):
        raise UsageError(f"no {kind} named in {text!r}{tail}")
    if not all(chosen):
        raise UsageError(f"an empty {kind} in {text!r} (two commas in a row, or one at an end){tail}")
    return chosen


def pick(kind: str, names: str | None, valid) -> list[str]:
    """Split a comma-separated selection and check each name against ``valid``.

    ``None`` or empty selects all of ``valid``.

    Raises:
        UsageError: an unknown name (with the closest valid one where one is close:
            ``unknown op 'GELU' (did you mean gelu?); valid ops: ...``), an empty item
            (``eager,,torch``) or only commas (:func:`items`); the message lists the valid ones.
    """
    valid = list(valid)
    if not names:
        return valid
    chosen = items(kind, names, f"valid {kind}s: {', '.join(valid)}")
    for n in chosen:
        if n not in valid:
            raise UsageError(f"unknown {kind} {n!r}{did_you_mean(n, valid)}; "
                             f"valid {kind}s: {', '.join(valid)}")
    return chosen
