"""Value types of the commands' options (argparse `type=`), shared by the command table
(cli.py) and the commands defined beside their code (history/command.py)."""

from __future__ import annotations

import argparse


def fraction(text: str) -> float:
    """'5%' -> 0.05, '0.05' -> 0.05. A bare number must be below 1 (write 5% for five percent)."""
    raw = text.strip()
    try:
        if raw.endswith("%"):
            value = float(raw[:-1]) / 100.0
        else:
            value = float(raw)
            if value >= 1.0:
                raise argparse.ArgumentTypeError(
                    f"{text!r} is ambiguous: write a percentage ({raw}%) or a fraction below 1"
                )
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a percentage like 5% or 0.05") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must not be negative")
    return value


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be positive")
    return value


def positive_int(text: str) -> int:
    """A whole number of at least 1 (worker counts, runs)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be >= 1")
    return value
