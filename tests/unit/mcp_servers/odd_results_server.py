"""A small MCP server for tests whose tools return what a model cannot use as-is: a 5 MB text, an
image, audio, a binary file, an error written as a plain result, and nothing at all.

    python odd_results_server.py                     # stdio, every tool
    python odd_results_server.py --only huge_report  # stdio, that one tool (a model forced to call
                                                     # a tool then has exactly one to choose)
"""

from __future__ import annotations

import sys

from fastmcp import FastMCP
from fastmcp.utilities.types import Audio, File, Image

HUGE_CHARS = 5_000_000
# A valid 1x1 PNG followed by padding, so the byte count in the placeholder is easy to check.
PNG = (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89"
       b"\x00\x00\x00\rIDATx\x9cc\xf8\x0f\x00\x00\x01\x01\x00\x05\x18\xd8N\x00\x00\x00\x00IEND\xaeB`\x82")
PNG_BYTES = 12_345
PHOTO = PNG + b"\x00" * (PNG_BYTES - len(PNG))

mcp = FastMCP("odd-results")


def huge_report() -> str:
    """The full inventory report (about 5 MB of text)."""
    line = "sku A-1001 stock 17 warehouse Denver\n"
    return (line * (HUGE_CHARS // len(line) + 1))[:HUGE_CHARS]


def product_photo() -> Image:
    """A photo of the product."""
    return Image(data=PHOTO, format="png")


def voice_note() -> Audio:
    """A recorded voice note (1,000 bytes of WAV)."""
    return Audio(data=b"RIFF" + b"\x00" * 996, format="wav")


def manual_pdf() -> File:
    """The product manual (2,048 bytes of PDF)."""
    return File(data=b"%PDF" + b"\x00" * 2044, format="pdf")


def stock_of(sku: str = "A-10") -> dict:
    """Units in stock for a SKU."""
    return {"error": f"unknown sku {sku}"}


def nothing() -> str:
    """Returns an empty text."""
    return ""


ONLY = sys.argv[sys.argv.index("--only") + 1] if __name__ == "__main__" and "--only" in sys.argv else None
for _tool in (huge_report, product_photo, voice_note, manual_pdf, stock_of, nothing):
    if ONLY is None or _tool.__name__ == ONLY:
        mcp.tool(_tool)

if __name__ == "__main__":
    mcp.run(show_banner=False)
