"""``tiktoken.get_encoding("stack100m-32768")`` in a fresh venv holding only ``stacktok[tiktoken]``.

The one test builds a venv in ``tmp_path`` (``uv venv``), installs the checkout -- copied to
``tmp_path`` first, so the build writes nothing here -- with the ``tiktoken`` extra from PyPI
(tiktoken pinned to this process's version, so the declared divergences are measured on the same
release), then asks the plugin for the encoding with every proxy pointed at a closed port and an
empty ``TIKTOKEN_CACHE_DIR``: the encoding must come from the file shipped in the wheel. The ids
of every shipped probe are compared here with the reference; a difference passes only when the
suite's own rule (``conformance.core.declared``) declares it for tiktoken.

That test is marked ``plugin`` (it reaches PyPI): its own nox session runs it, the plain test
sessions never do. The other test builds the plugin's encoding in this process, offline.
Out of scope: the encode API (``test_api.py``), the tiktoken export file (``test_export_tiktoken.py``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conformance.backends.tiktoken_backend import TiktokenBackend
from conformance.core.declared import Declarations
from conformance.core.fixtures import FixtureSet, Probe
from stacktok_export import StackTokenizer
from stacktok_export.artifact.artifact import ARTIFACT_NAME
from stacktok_export.export.tiktoken_fmt import to_tiktoken

from .conftest import ROOT, need
from .helpers.strings import HARD_STRINGS

tiktoken = need("tiktoken", "tiktoken")

ENCODING = Path(ARTIFACT_NAME).stem  # "stack100m-32768"
#: top-level folders of the checkout no wheel needs (never copied)
NOT_SHIPPED = {".git", ".nox", ".venv", ".hypothesis", "mutants", "build", "tests", "benchmarks", "tokenizer"}
DEAD_PROXY = "http://127.0.0.1:9"  # the discard port: any download attempt fails at once
#: what the venv runs: the plugin's encoding on every probe (argv: encoding, probes.jsonl, out.json)
SCRIPT = """
import importlib.util, json, sys
import tiktoken
enc = tiktoken.get_encoding(sys.argv[1])
import tiktoken_ext.stacktok as plugin
others = [m for m in ("tokenizers", "transformers", "jinja2", "gguf") if importlib.util.find_spec(m)]
out = {"plugin": plugin.__file__, "name": enc.name, "n_vocab": enc.n_vocab, "ids": {},
       "tiktoken": tiktoken.__version__, "other_extras": others}
with open(sys.argv[2], encoding="utf-8") as f:
    for line in f:
        p = json.loads(line)
        text = p["text"]
        ids = enc.encode(text, allowed_special="all") if p["allow_special"] else enc.encode_ordinary(text)
        out["ids"][p["id"]] = ids
with open(sys.argv[3], "w", encoding="utf-8") as f:
    json.dump(out, f)
"""


def _run(args: list[str], **kwargs) -> None:
    done = subprocess.run(args, capture_output=True, text=True, timeout=900, **kwargs)
    if done.returncode:
        tail = (done.stdout + done.stderr)[-4000:]
        pytest.fail(f"{' '.join(args[:4])} ... exited {done.returncode}:\n{tail}", pytrace=False)


def _not_shipped(folder: Path, name: str) -> bool:
    return name == "__pycache__" or name.endswith(".egg-info") or (folder == ROOT and name in NOT_SHIPPED)


def _fresh_venv(tmp_path: Path) -> Path:
    """A venv with only ``stacktok[tiktoken]`` from a copy of the checkout; its python."""
    src = tmp_path / "src"
    shutil.copytree(
        ROOT,
        src,
        ignore=lambda d, names: [n for n in names if _not_shipped(Path(d), n)],
    )
    uv = [sys.executable, "-m", "uv"]
    _run([*uv, "venv", "-q", "--python", sys.executable, str(tmp_path / "venv")])
    python = tmp_path / "venv" / "bin" / "python"
    pins = [f"{src}[tiktoken]", f"tiktoken=={tiktoken.__version__}"]
    _run([*uv, "pip", "install", "-q", "--python", str(python), *pins])
    return python


def _plugin_ids(python: Path, probes: list[Probe], tmp_path: Path) -> dict:
    """Run :data:`SCRIPT` in the venv, offline; its JSON output."""
    probe_file, out_file = tmp_path / "probes.jsonl", tmp_path / "out.json"
    rows = (json.dumps({"id": p.id, "text": p.text, "allow_special": p.allow_special}) for p in probes)
    probe_file.write_text("\n".join(rows) + "\n", encoding="utf-8")
    (tmp_path / "empty-cache").mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    for proxy in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "all_proxy"):
        env[proxy] = DEAD_PROXY
    env.update(NO_PROXY="", no_proxy="", TIKTOKEN_CACHE_DIR=str(tmp_path / "empty-cache"))
    _run([str(python), "-I", "-c", SCRIPT, ENCODING, str(probe_file), str(out_file)], cwd=tmp_path, env=env)
    return json.loads(out_file.read_text(encoding="utf-8"))


def _ids(backend: TiktokenBackend, probe: Probe) -> list[int]:
    return backend.encode(probe.text, allow_special=probe.allow_special)


def test_plugin_builds_the_reference_and_imports_nothing_until_asked(shipped_tok: StackTokenizer) -> None:
    from tiktoken_ext import stacktok as plugin  # the checkout's copy (ROOT is on sys.path)

    assert list(plugin.ENCODING_CONSTRUCTORS) == [ENCODING] == [plugin.NAME]
    enc = tiktoken.Encoding(**plugin.ENCODING_CONSTRUCTORS[ENCODING]())
    assert (enc.name, enc.n_vocab) == (ENCODING, shipped_tok.vocab_size)
    assert enc.special_tokens_set == set(shipped_tok.special_to_id)
    for text in HARD_STRINGS:
        assert enc.encode(text, allowed_special="all") == shipped_tok.encode(text, allowed_special="all")
        assert enc.encode_ordinary(text) == shipped_tok.encode(text)
    # tiktoken imports every plugin module even for cl100k_base: ours must stay light
    heavy = "('stacktok_export', 'tiktoken', 'regex', 'numpy')"
    probe = f"import sys, tiktoken_ext.stacktok; print([m for m in {heavy} if m in sys.modules])"
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


@pytest.mark.plugin
def test_get_encoding_in_a_fresh_venv_equals_the_reference_on_every_probe(
    shipped_tok: StackTokenizer, tmp_path: Path
) -> None:
    fixtures = FixtureSet.load()
    python = _fresh_venv(tmp_path)
    got = _plugin_ids(python, fixtures.probes, tmp_path)

    assert Path(got["plugin"]).is_relative_to(tmp_path / "venv"), got["plugin"]  # the wheel's, not ours
    assert got["other_extras"] == [] and got["tiktoken"] == tiktoken.__version__
    assert (got["name"], got["n_vocab"]) == (ENCODING, shipped_tok.vocab_size)
    assert not any((tmp_path / "empty-cache").iterdir())  # nothing was downloaded or cached

    # the same encoding as the export built here: every probe, byte for byte
    local = TiktokenBackend(to_tiktoken(shipped_tok), tiktoken.__version__)
    differ = [p.id for p in fixtures.probes if got["ids"][p.id] != _ids(local, p)]
    assert differ == [], f"{len(differ)} probes differ from to_tiktoken(): {differ[:10]}"

    # and the reference's ids, except where the suite declares tiktoken's own divergence
    declarations = Declarations(fixtures.divergences, shipped_tok)
    undeclared = []
    for p in fixtures.probes:
        want = shipped_tok.encode(p.text, allowed_special="all" if p.allow_special else frozenset())
        check = "trusted" if p.allow_special else "encode"
        if got["ids"][p.id] != want and declarations.declared(local, check, p) is None:
            undeclared.append(p.id)
    assert undeclared == [], f"{len(undeclared)} undeclared differences from the reference: {undeclared[:10]}"
    assert len(got["ids"]) == len(fixtures.probes) > 5000
