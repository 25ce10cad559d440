"""``stacktok audit [ARTIFACT_OR_DIR]``: a static audit of a byte-level BPE vocabulary.

Input: an artifact JSON (default: the ``--artifact`` default,
``conformance.core.arguments``), or a tokenizer directory or Hub id -- then the
vocabulary in its ``tokenizer.json`` (merges + vocab, turned back into bytes
with the GPT-2 byte<->char table) *and* the artifact given by ``--artifact``
are audited. The inputs are planned as every tool plans them
(``conformance.plan``): the directory's files validated once (a malformed one
is exit 2, as in the gate), the artifact loaded once. Findings, one line each:

1. ``self_reachable`` -- merge-list BPE of every token's own bytes gives
   exactly that token. Only then do tiktoken's rank merging and HF/llama.cpp
   ``ignore_merges`` agree with the merge list (rten#453: 588 Llama-3 tokens
   unreachable; llama.cpp PR#7193 " Việt").
2. ``duplicate_bytes`` -- no two ids (specials included) have the same bytes
   (llama.cpp aborts on duplicate token strings).
3. ``merge_order`` -- every merge combines lower ids into a higher one, and
   (tokenizer.json) merges are listed in the order of their result ids.
4. ``specials_unreachable`` -- untrusted encoding of each special string in
   a few shapes gives no special id; no ordinary token spells or contains one.
5. ``long_tokens`` (info) -- tokens over 32 bytes (``Llama.detokenize``
   returns ``b''`` for them, llama-cpp-python#2362).
6. ``partial_utf8`` (info) -- tokens that are not valid UTF-8 on their own:
   what a streaming decoder must hold back.
7. ``unicode_tables`` (info) -- every code point (surrogates skipped, all
   planes) where an installed backend's pre-tokenizer splits differently from
   the reference's ``regex``, found by encoding blocks of probe shapes and
   bisecting the blocks that differ; plus each backend's apparent Unicode
   version (which sentinel code points it treats as letters). Disagreement is
   informational -- declared divergences cover it -- but always stated (a
   ``declared_divergences`` skip row says so when the declarations cannot be read).

Each finding is a suite :class:`~conformance.core.rows.Row` (check = name, backend = subject,
message = summary) with its evidence beside it (``findings``). Exit 0: no violation of 1-4;
1: a violation (``conformance.core.rows.exit_code``); 2: usage error (one-line reason),
including an artifact that ``StackTokenizer.load`` refuses for any reason other than its merge
order (e.g. a recorded regex engine whose tables differ). The JSON report has sorted keys and
no timestamps or timings.

One idea per module: ``command`` (arguments, run, exit), ``target`` (what is audited),
``vocab`` / ``tokenizer_json`` (reading a vocabulary), ``reachability`` / ``collisions`` /
``informational`` (findings 1-6), ``vocabulary`` (running them), ``unicode_scan`` /
``backends`` / ``unicode_tables`` (finding 7), ``findings`` (rows + evidence), ``render``
(human and JSON output). The merge rule is ``stacktok_export.models.bpe.textbook``.

Out of scope: fixing anything; whether a directory's export files match the
artifact (``stacktok gate`` checks that -- ``unicode_tables`` compares the
libraries' tables through exports rendered from the artifact); non-byte-level
vocabularies (SentencePiece ``<0xNN>``); non-special added tokens; regex
differences that are not Unicode tables (llama.cpp's ``'[sS]`` vs case-folded
``'ſ``); white-space class changes, which are reported only when they change ids.
"""

from __future__ import annotations

from conformance.audit.command import add_arguments, main, run_audit
from conformance.audit.findings import Evidence, Findings, Found
from conformance.audit.unicode_scan import (
    SENTINELS,
    apparent_version,
    backend_class,
    reference_class,
    scan_blocks,
)
from conformance.audit.unicode_scan import code_point_runs as _ranges  # the tests' old name
from conformance.audit.vocabulary import VIOLATIONS
from stacktok_export.models.bpe.textbook import MergeListBPE
from stacktok_export.split.drift import choose_shape

__all__ = [
    "SENTINELS",
    "VIOLATIONS",
    "Evidence",
    "Findings",
    "Found",
    "MergeListBPE",
    "_ranges",
    "add_arguments",
    "apparent_version",
    "backend_class",
    "choose_shape",
    "main",
    "reference_class",
    "run_audit",
    "scan_blocks",
]
