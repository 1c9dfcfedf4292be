"""Names chosen on the command line or in a case file (ops, backends, dtypes, shapes), each checked
against the valid ones: a leaf, so that the harness and the command line share one rule."""

from __future__ import annotations

from fusebench.errors import UsageError


def pick(kind: str, names: str | None, valid) -> list[str]:
    """Split a comma-separated selection and check each name against ``valid``.

    ``None`` or empty selects all of ``valid``.

    Raises:
        UsageError: an unknown name, or only commas (``","``); the message lists the valid ones.
    """
    valid = list(valid)
    if not names:
        return valid
    chosen = [n.strip() for n in names.split(",") if n.strip()]
    if not chosen:
        raise UsageError(f"no {kind} named in {names!r}; valid {kind}s: {', '.join(valid)}")
    for n in chosen:
        if n not in valid:
            raise UsageError(f"unknown {kind} {n!r}; valid {kind}s: {', '.join(valid)}")
    return chosen
