"""Human-readable numbers: a leaf module every layer may use."""

from __future__ import annotations


def fmt_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024
    return f"{n:.2f} TiB"


def fmt_us(t: float) -> str:
    return f"{t / 1000:.3f} ms" if abs(t) >= 1000 else f"{t:.1f} us"


def bound_line(makespan_us: float, exposed_us: float, source: str) -> str:
    """The one way every command prints a lower bound, with where it comes from."""
    return f"lower bound: makespan {fmt_us(makespan_us)}, exposed {fmt_us(exposed_us)} ({source})"


def clip(text: str, width: int) -> str:
    """`text` cut to at most `width` characters at a word boundary, with an ellipsis when cut."""
    if len(text) <= width:
        return text
    cut = text[: width - 1]
    space = cut.rfind(" ")
    return (cut[:space] if space > width // 2 else cut).rstrip(" ,;:") + "…"
