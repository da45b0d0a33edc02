"""The consoles every command prints to, safe for untrusted text. Their own module so that
progress lines (cli/progress.py) and the shared options (cli/common.py) both print without
importing each other."""

from __future__ import annotations

import re
from typing import Any

from rich.console import Console

# C0 and C1 control characters but newline and tab: an escape sequence in a task id or a model's
# text must not reach the terminal (it could clear it, retitle it, or fake output)
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def plain(text: str) -> str:
    """`text` with its control characters shown as escapes (`\\x1b`), not sent to the terminal."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


class SafeConsole(Console):
    """Prints text as text: no markup or emoji codes read from it (`[red]`, `:bank:` are shown as
    written; the few static styled lines pass `markup=True`), no control characters let through."""

    def render_str(self, text: str, **options: Any) -> Any:
        return super().render_str(plain(text), **options)


console = SafeConsole(highlight=False, markup=False, emoji=False)
err_console = SafeConsole(stderr=True, highlight=False, markup=False, emoji=False)
