"""``stacktok pack --engine ray`` without ``--address`` on a machine where ``ray start`` runs a
cluster: a new local Ray starts (as documented), the running cluster is not joined.

Ray's ``ray.init()`` joins a cluster that ``ray start`` left running on the machine and then
refuses ``num_cpus`` ("When connecting to an existing cluster, num_cpus and num_gpus must not
be provided"), so the command failed on any machine that runs a Ray head. In a module of its
own: the head runs in the foreground (``--block``) in its own process group, killed with it, never by
``ray stop``, which would stop every Ray on the machine. Needs ray (the ``ray`` extra).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

from stacktok_export.pack import PackOptions, pack

from .conftest import need


def test_without_address_a_running_head_is_not_joined(tmp_path: Path) -> None:
    ray = need("ray", "ray")
    ray_cli = shutil.which("ray")
    assert ray_cli, "the ray command is missing although ray imports"
    ray.shutdown()
    current = Path("/tmp/ray/ray_current_cluster")  # where `ray start` writes its address
    started = time.time() - 1
    head = subprocess.Popen(
        [
            ray_cli,
            "start",
            "--head",
            "--num-cpus",
            "1",
            "--include-dashboard=false",
            "--block",
            "--port",
            "0",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not (current.exists() and current.stat().st_mtime >= started):
            time.sleep(0.2)
        assert current.stat().st_mtime >= started, "the Ray head did not start"
        corpus = tmp_path / "docs.jsonl"
        corpus.write_text("".join(json.dumps({"text": f"doc {i} " * 50}) + "\n" for i in range(400)))
        manifest = pack(
            [str(corpus)], tmp_path / "out", options=PackOptions(engine="ray", workers=2, quiet=True)
        )
        assert manifest["totals"]["documents"] == 400
    finally:
        ray.shutdown()
        os.killpg(head.pid, signal.SIGKILL)  # its own process group (SIGTERM takes Ray ~30 s)
        head.wait(timeout=60)
