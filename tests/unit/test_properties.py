"""Java `.properties` files read as Java reads them (drctl/properties.py)."""

from __future__ import annotations

from drctl.properties import parse_properties


def test_properties_are_read_as_java_reads_them() -> None:
    text = ("! a comment\n  # another\n\na=1\nb : 2\nc 3\nalone\nwith\\=equals=x\n"
            "joined = one \\\n     two\nwindows=C:\\\\dir\nunicode=caf\\u00e9\n"
            "ends.in.backslash=x\\\\\nnext=y\nspaces  =  kept inside  \n")
    assert parse_properties(text) == {
        "a": "1", "b": "2", "c": "3", "alone": "", "with=equals": "x", "joined": "one two",
        "windows": "C:\\dir", "unicode": "café", "ends.in.backslash": "x\\", "next": "y",
        "spaces": "kept inside  "}
