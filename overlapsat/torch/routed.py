"""Sizes that depend on the data, priced at balanced routing (decision 89).

An expert-parallel step sends each rank's routed tokens with `all_to_all_single`, whose split sizes are read
from the data (`.tolist()` under `capture_scalar_outputs`): traced, they are unbacked symbols, and so are the
sizes of every tensor the received tokens flow into. Their bytes are unknown when the graph is planned.

Counted as 0 bytes (decision 70) the memory model read torchtitan's DeepSeek-V3 step 4.4-9.2 % low on the GPU.
Priced at their expectation under balanced routing instead, each split of an all_to_all whose input rows are
known is that many rows over the group's size: every rank sends as many rows as it has, spread evenly, so it
receives as many. The forward graph binds the symbols; the backward graph, traced with the same symbols and
the same ShapeEnv, reads them from it (`_SEEN`), and so does the reading of Inductor's nodes after fusion
(`inductor_sizes_bound`). A size still unknown after that counts 0 bytes, as before.
A plan's peak is then the expected one: a step whose routing is skewed can hold more.
"""

from __future__ import annotations

import contextlib
import contextvars
import weakref
from collections.abc import Iterator
from typing import Any

_EXPECTED: contextvars.ContextVar[dict[Any, int] | None] = contextvars.ContextVar("overlapsat_expected", default=None)
# symbols bound per ShapeEnv: the backward graph of a step shares its forward's ShapeEnv and symbols
_SEEN: weakref.WeakKeyDictionary[Any, dict[Any, int]] = weakref.WeakKeyDictionary()


def _sym_node(v: Any) -> Any:
    """The SymNode of a SymInt, or of an FX node holding one; None for anything else."""
    if hasattr(v, "meta"):
        v = v.meta.get("val")
    return getattr(v, "node", None)


def _expr(v: Any) -> Any:
    """The sympy expression of a SymInt (or of an FX node holding one), or None for anything else."""
    return getattr(_sym_node(v), "expr", None)


def _shape_env(v: Any) -> Any:
    return getattr(_sym_node(v), "shape_env", None)


def value(v: Any, bound: dict[Any, int] | None = None) -> int | None:
    """`v` (an int, a SymInt or an FX node holding one) as an int: itself where known, else its expression with
    the bound symbols put in where that leaves a number; None where it does not."""
    if hasattr(v, "meta"):
        v = v.meta.get("val")
    try:
        return int(v)
    except Exception:  # noqa: BLE001 - torch raises its own guard errors for data-dependent values
        pass
    e = _expr(v)
    if e is None:
        return None
    e = e.xreplace(bound if bound is not None else _EXPECTED.get() or {})
    return int(e) if e.is_number else None


def expected_sizes(fx_nodes: list[Any], is_all_to_all: Any) -> dict[Any, int]:
    """Per unbacked symbol of an all_to_all's split sizes: its expected value under balanced routing (the
    all_to_all's input rows over the number of splits), from the graph's all_to_alls in their order, with
    what earlier graphs of the same ShapeEnv bound. `is_all_to_all(node)` says which nodes to read."""
    bound: dict[Any, int] = {}
    envs = []
    a2as = [n for n in fx_nodes if n.op == "call_function" and is_all_to_all(n) and len(n.args) >= 3]
    for n in a2as:
        splits = [s for arg in (n.args[1], n.args[2]) if isinstance(arg, (list, tuple)) for s in arg]
        env = next((_shape_env(s) for s in splits if _shape_env(s) is not None), None)
        if env is not None and env not in envs:
            envs.append(env)
            bound.update({k: v for k, v in bound_in(env).items() if k not in bound})
    for n in a2as:
        t = n.args[0].meta.get("val") if hasattr(n.args[0], "meta") else None
        rows = value(t.shape[0], bound) if t is not None and getattr(t, "dim", lambda: 0)() > 0 else None
        for arg in (n.args[1], n.args[2]):
            if rows is None or not isinstance(arg, (list, tuple)) or not arg:
                continue
            for s in arg:
                e = _expr(s)
                if e is not None and e.is_Symbol and e not in bound:
                    bound[e] = rows // len(arg)
    for env in envs:
        try:
            _SEEN.setdefault(env, {}).update(bound)
        except TypeError:  # a ShapeEnv that takes no weak reference: each graph binds its own
            pass
    return bound


def bound_in(shape_env: Any) -> dict[Any, int]:
    """What the FX imports of this ShapeEnv bound (empty if none): Inductor's buffers after fusion carry the
    same symbols, so the reading after fusion prices them alike."""
    try:
        return _SEEN.get(shape_env, {}) if shape_env is not None else {}
    except TypeError:
        return {}


@contextlib.contextmanager
def inductor_sizes_bound() -> Iterator[None]:
    """Inside: Inductor's size hints (`V.graph.sizevars`, which its memory planning reads for each buffer: by
    `optimization_hint` in torch 2.13, by `size_hint` in older releases) put in what the FX imports of this
    graph's ShapeEnv bound, so that the reading after fusion prices data-dependent buffers as the FX model does.
    Nothing changes where nothing was bound."""
    from torch._inductor.virtualized import V

    sizevars = V.graph.sizevars
    bound = bound_in(getattr(sizevars, "shape_env", None))
    names = [n for n in _HINTS if callable(getattr(sizevars, n, None))] if bound else []
    own = {n: sizevars.__dict__.get(n) for n in names}
    for n in names:
        setattr(sizevars, n, _bound_hint(getattr(sizevars, n), bound))
    try:
        yield
    finally:
        for n in names:
            if own[n] is None:
                delattr(sizevars, n)
            else:
                setattr(sizevars, n, own[n])


_HINTS = ("optimization_hint", "size_hint", "size_hint_or_throw")


def _bound_hint(hint: Any, bound: dict[Any, int]) -> Any:
    def bound_hint(expr: Any, *args: Any, **kwargs: Any) -> Any:
        return hint(expr.xreplace(bound) if hasattr(expr, "xreplace") else expr, *args, **kwargs)

    return bound_hint


@contextlib.contextmanager
def priced_at(bound: dict[Any, int]) -> Iterator[None]:
    """Inside: `value` puts `bound`'s symbols into the sizes it reads (an import's expected sizes)."""
    token = _EXPECTED.set(bound)
    try:
        yield
    finally:
        _EXPECTED.reset(token)


__all__ = ["bound_in", "expected_sizes", "inductor_sizes_bound", "priced_at", "value"]
