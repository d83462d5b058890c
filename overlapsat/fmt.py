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
