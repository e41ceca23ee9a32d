"""Flag values sglang's own argparse parser would refuse, before anything starts.

The inspector reports, for each flag the user passes, what the installed release registers for it
(`type=`, `choices=`, `nargs=`, the action). This walks the argv tail as argparse does and applies
argparse's rules: a store_true-like flag takes no value, `type=int`/`float` must convert, a value
must be one of `choices` (compared after conversion), nargs decides how many values follow. Only
what is known statically is judged: a custom `type=` callable or choices that are not literals are
left alone."""
from __future__ import annotations

import re
from typing import Any, Iterator, Optional

_NO_VALUE_ACTIONS = {"store_true", "store_false", "store_const", "count", "help", "version",
                     "BooleanOptionalAction"}
_NEGATIVE = re.compile(r"^-\d+$|^-\d*\.\d+$")  # argparse reads these as values (no option looks like one)
_CONVERT = {"int": int, "float": float, "str": str, None: str}


def _action(rec: dict) -> Optional[str]:
    values = rec.get("values") or {}
    text = values.get("action") or (rec.get("defined_at") or {}).get("action")
    if not text:
        return None
    return text.strip("'\"").rsplit(".", 1)[-1]


def _is_value(token: str) -> bool:
    return not token.startswith("-") or bool(_NEGATIVE.match(token))


def invalid(flags: list[str], user_flags: list[dict], version: Optional[str]) -> Iterator[str]:
    """One message per value sglang `version` would refuse, e.g. "--tp-size one: invalid int value"."""
    records = {r.get("flag"): r for r in user_flags if r.get("accepted")}
    i = 0
    while i < len(flags):
        token = flags[i]
        i += 1
        rec = records.get(token)
        if not token.startswith("--") or rec is None:
            continue
        name, eq, inline = token.partition("=")
        spec: dict[str, Any] = rec.get("values") or {}
        option = rec.get("abbreviation_of") or rec.get("option") or name
        where = _where(rec)
        action = _action(rec)
        if action in _NO_VALUE_ACTIONS:
            if eq:
                yield f"{name}={inline}: sglang {version}'s {option} takes no value (ignored explicit argument {inline!r}){where}."
            elif i < len(flags) and _is_value(flags[i]):
                yield (f"{name} {flags[i]}: sglang {version}'s {option} takes no value, so {flags[i]!r} is an "
                       f"unrecognized argument{where}; pass `{name}` alone, or leave it out for false.")
            continue
        if action is not None and action not in ("store", "append"):
            while i < len(flags) and _is_value(flags[i]):  # a custom action: its values are its business
                i += 1
            continue
        nargs = spec.get("nargs")
        values = [inline] if eq else []
        if not eq:
            want = {None: 1, "?": 1, "*": None, "+": None}.get(nargs, nargs if isinstance(nargs, int) else None)
            while i < len(flags) and _is_value(flags[i]) and (want is None or len(values) < want):
                values.append(flags[i])
                i += 1
        if not values and nargs in (None, "+") or isinstance(nargs, int) and len(values) < nargs:
            yield f"{name}: sglang {version}'s {option} expects {'one argument' if nargs is None else 'at least one argument' if nargs == '+' else f'{nargs} arguments'}{where}."
            continue
        kind = spec.get("type")
        if kind not in _CONVERT:
            continue
        for v in values:
            try:
                converted = _CONVERT[kind](v)
            except ValueError:
                yield f"{name} {v}: sglang {version} refuses it: invalid {kind} value {v!r}{where}."
                continue
            choices = spec.get("choices")
            if isinstance(choices, list) and converted not in choices:
                shown = ", ".join(map(str, choices[:12])) + (", ..." if len(choices) > 12 else "")
                yield f"{name} {v}: sglang {version} refuses it: invalid choice {v!r} (choose from {shown}){where}."


def _where(rec: dict) -> str:
    at = rec.get("defined_at") or {}
    if not at.get("file"):
        return ""
    return f" ({at['file'].rsplit('/sglang/', 1)[-1]}:{at.get('line')})"
