"""Drake's Meshcat viewer script as a page inlines it: without the decoders it embeds for formats a page never sends.

``meshcat.js`` (Drake 1.51: 2.2 MB) carries, as base64 strings, the WebAssembly and JavaScript of four decoders
that three.js fetches only when it loads a Draco-compressed glTF mesh or a KTX2/Basis texture (Meshcat's
``meshcat_inline_assets``: ``basis_transcoder.js``, ``basis_transcoder.wasm``, ``draco_decoder.wasm``,
``draco_wasm_wrapper.js``) and the Zstandard decoder of KTX2 supercompression: 1.1 MB of the file, and 0.63 MB of
the 1.02 MB it packed to. A page of this package sends only its own baked meshes and, as a fallback, COLLADA, OBJ
and STL files (``web_page``, ``mesh_files.MESH_FORMATS``), which use none of them; the page's security policy would
refuse a fetch of anything else anyway. :func:`lean_viewer` empties those strings and changes nothing else: a
string that is a base64 ``data:`` URL of ``application/wasm`` or ``application/javascript``, or a base64
WebAssembly module (it starts with the module's magic number, "AGFzbQ" in base64), of at least
:data:`MIN_EMBEDDED_CHARS` characters. A viewer without them is used as it is.
"""

from __future__ import annotations

import re

MIN_EMBEDDED_CHARS = 1000  # a shorter base64 string is no decoder (and not worth removing)
_EMBEDDED = re.compile(
    rb'"(data:application/(?:wasm|javascript);base64,)[A-Za-z0-9+/]{%d,}={0,2}"'
    rb'|"AGFzbQ[A-Za-z0-9+/]{%d,}={0,2}"' % (MIN_EMBEDDED_CHARS, MIN_EMBEDDED_CHARS))


def lean_viewer(script: bytes) -> bytes:
    """``script`` (Meshcat's ``meshcat.js``) with every embedded decoder's string emptied (module docstring): a data
    URL keeps its ``data:...;base64,`` head, a bare base64 module becomes ``""``."""
    return _EMBEDDED.sub(lambda m: b'"' + (m.group(1) or b"") + b'"', script)


def embedded_decoders(script: bytes) -> int:
    """How many embedded decoder strings ``script`` holds (:func:`lean_viewer` empties them)."""
    return len(_EMBEDDED.findall(script))
