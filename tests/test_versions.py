"""Backend versions from the command line: flags, explicit ``latest`` resolution, the CPU torch overrides,
and a matrix row's resolution (``conformance.matrix.resolve``, what the noxfile's sessions call).

``latest`` is resolved by the real uv against a local ``--find-links`` directory of tiny
wheels, so the test can "release" a newer version and see the next resolution pick it.
Out of scope: installing and running a row (``nox -s conformance``).
"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from conformance.matrix import resolve as row
from conformance.matrix import versions
from conformance.matrix.versions import Resolved, VersionError, parse_flags, resolve

from .conftest import need


def tiny_wheel(directory: Path, name: str, version: str, *, requires: tuple[str, ...] = ()) -> Path:
    """A valid, empty pure-Python wheel ``name==version`` (metadata only), depending on ``requires``."""
    path = directory / f"{name}-{version}-py3-none-any.whl"
    info = f"{name}-{version}.dist-info"
    deps = "".join(f"Requires-Dist: {r}\n" for r in requires)
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n{deps}")
        z.writestr(
            f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        )
        z.writestr(f"{info}/RECORD", "")
    return path


def test_flags_split_versions_update_index_and_the_rest(tmp_path: Path) -> None:
    flags = parse_flags(
        [
            "--transformers",
            "5.25.0",
            "--vllm",
            "latest",
            "--update",
            "--find-links",
            str(tmp_path),
            "--probes",
            "p.jsonl",
        ]
    )
    assert flags.named == {"transformers": "5.25.0", "vllm": "latest"}
    assert flags.update
    assert flags.index == ("--find-links", str(tmp_path.resolve()))
    assert flags.rest == ("--probes", "p.jsonl")
    assert parse_flags([]).named == {}


def test_an_exact_version_is_pinned_and_names_its_slot() -> None:
    r = resolve("transformers", "5.25.0")
    assert r == Resolved("transformers", "5.25.0", "5.25.0", "transformers==5.25.0")
    assert r.slot == "transformers-5.25.0"


@pytest.mark.parametrize("value", ["five", "5.25.0; rm -rf /", ">=5", ""])
def test_a_bad_value_is_one_line_that_says_what_to_give(value: str) -> None:
    with pytest.raises(VersionError, match="exact version .* 'latest' or a path to a .whl"):
        resolve("transformers", value)


def test_a_wheel_path_gives_its_version_and_installs_the_file(tmp_path: Path) -> None:
    wheel = tiny_wheel(tmp_path, "tiktoken", "0.15.0")
    r = resolve("tiktoken", str(wheel))
    assert (r.version, r.requirement, r.slot) == ("0.15.0", str(wheel.resolve()), "tiktoken-0.15.0")
    with pytest.raises(VersionError, match="a wheel of tiktoken, not tokenizers"):
        resolve("tokenizers", str(wheel))
    with pytest.raises(VersionError, match="no such wheel file"):
        resolve("tiktoken", str(tmp_path / "tiktoken-0.16.0-py3-none-any.whl"))


def test_latest_is_resolved_now_and_follows_a_new_release_on_the_index(tmp_path: Path) -> None:
    need("uv", "test")
    tiny_wheel(tmp_path, "tiktoken", "0.13.0")
    index = parse_flags(["--find-links", str(tmp_path), "--no-index"]).index
    first = resolve("tiktoken", "latest", index=index)
    assert (first.version, first.requirement, first.slot) == ("0.13.0", "tiktoken==0.13.0", "tiktoken-latest")
    tiny_wheel(tmp_path, "tiktoken", "0.13.1")  # "released this morning"
    assert resolve("tiktoken", "latest", index=index).version == "0.13.1"
    assert versions.latest_version("tiktoken<0.13.1", index=index) == "0.13.0"


def test_latest_passes_over_a_release_whose_dependencies_the_index_lacks(tmp_path: Path) -> None:
    """transformers 5.25.0 reached the mirror before kernels>=0.19.1 did: `latest` is what installs."""
    need("uv", "test")
    tiny_wheel(tmp_path, "transformers", "5.24.0", requires=("kernels>=0.17",))
    tiny_wheel(tmp_path, "transformers", "5.25.0", requires=("kernels>=0.19.1",))
    tiny_wheel(tmp_path, "kernels", "0.17.2")
    index = parse_flags(["--find-links", str(tmp_path), "--no-index"]).index
    got = resolve("transformers", "latest", index=index)
    assert (got.version, got.requirement, got.newest) == ("5.24.0", "transformers==5.24.0", "5.25.0")
    assert resolve("transformers", "latest", index=index, installable=False).version == "5.25.0"
    tiny_wheel(tmp_path, "kernels", "0.19.1")  # the dependency arrives: the newest release is installable
    assert resolve("transformers", "latest", index=index) == Resolved(
        "transformers", "latest", "5.25.0", "transformers==5.25.0"
    )
    tiny_wheel(tmp_path, "transformers", "5.26.0", requires=("nothing-provides-this",))
    assert resolve("transformers", "latest", index=index).version == "5.25.0"
    in_range = versions.resolve_newest("transformers", "transformers>=5,<5.27", value="5.x", index=index)
    assert (in_range.version, in_range.newest, in_range.value) == ("5.25.0", "5.26.0", "5.x")


def test_latest_of_a_package_the_index_lacks_says_so(tmp_path: Path) -> None:
    need("uv", "test")
    index = parse_flags(["--find-links", str(tmp_path), "--no-index"]).index
    with pytest.raises(VersionError, match="cannot resolve the newest trl"):
        resolve("trl", "latest", index=index)


def test_cpu_overrides_pin_the_disk_torch_and_drop_gpu_only_packages(tmp_path: Path) -> None:
    torch = tmp_path / "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"
    resolution = (
        "numpy==2.3.5\nnvidia-nvvm==13.5.37\ntorch @ file:///x.whl\ntriton==3.9.0\ntokenizers==0.23.3\n"
    )
    gpu = versions.gpu_only_in(resolution)
    assert gpu == ["nvidia-nvvm", "triton"]
    lines = versions.cpu_overrides(torch, gpu).splitlines()
    assert lines[0] == f"torch @ {torch.resolve().as_uri()}"
    assert lines[1:] == ["nvidia-nvvm; sys_platform == 'never'", "triton; sys_platform == 'never'"]


def test_no_cpu_torch_wheel_is_an_error_naming_where_it_looked(tmp_path: Path) -> None:
    with pytest.raises(VersionError, match=f"no CPU torch wheel .* in {tmp_path}"):
        versions.cpu_torch_wheel((tmp_path,))


@pytest.mark.parametrize("floor_at", range(8))
def test_bisection_finds_the_oldest_passing_release_in_few_tries(floor_at: int) -> None:
    releases = [f"1.{i}.0" for i in range(7)]
    floor, tried = versions.bisect_oldest(releases, lambda v: releases.index(v) >= floor_at)
    assert floor == (releases[floor_at] if floor_at < 7 else None)
    assert len(tried) <= 4  # the newest, then log2(7) halvings
    assert all(ok == (releases.index(v) >= floor_at) for v, ok in tried.items())


# ------------------------------------------------------------------ a matrix row (resolve)
ROWS = {
    "tiktoken-0.5.2": ("tiktoken", "0.5.2"),
    "tiktoken-latest": ("tiktoken", "latest"),
    "llama.cpp-0.3.36": ("llama-cpp-python", "0.3.36"),
}


def test_a_named_package_runs_in_its_latest_row_and_every_other_row_skips() -> None:
    assert [row.row_value(r, ROWS, parse_flags([])) for r in ROWS] == ["0.5.2", "latest", "0.3.36"]
    named = parse_flags(["--tiktoken", "0.14.0", "--llama-cpp-python", "0.3.40"])
    assert [row.row_value(r, ROWS, named) for r in ROWS] == [None, "0.14.0", "0.3.40"]
    assert row.row_value("tiktoken-latest", ROWS, parse_flags(["--vllm", "0.34.0"])) is None


def test_a_default_range_resolves_to_its_newest_installable_release(tmp_path: Path) -> None:
    need("uv", "test")
    tiny_wheel(tmp_path, "transformers", "4.57.5")
    tiny_wheel(tmp_path, "transformers", "4.57.6", requires=("kernels>=9",))
    tiny_wheel(tmp_path, "transformers", "5.0.0")
    index = parse_flags(["--find-links", str(tmp_path), "--no-index"]).index
    got = row.resolve_row("transformers", "transformers>=4.57,<4.58", index=index)
    assert (got.version, got.requirement, got.newest) == ("4.57.5", "transformers==4.57.5", "4.57.6")
    assert got.slot == "transformers-4.57.5" and got.value == "transformers>=4.57,<4.58"
    assert row.resolution_log(got) == [
        "transformers 4.57.6 passed over: its dependencies are not on this index",
        "transformers: transformers>=4.57,<4.58 resolves to 4.57.5 (installing transformers==4.57.5)",
    ]
    assert row.resolve_row("transformers", "4.57.6", index=index).requirement == "transformers==4.57.6"


def test_a_package_on_the_cpu_torch_resolves_without_its_dependencies(tmp_path: Path) -> None:
    """vLLM's and TRL's GPU dependencies are overridden at install time, so they never hold a release back."""
    need("uv", "test")
    tiny_wheel(tmp_path, "trl", "1.15.0")
    tiny_wheel(tmp_path, "trl", "1.16.0", requires=("nvidia-only>=1",))
    index = parse_flags(["--find-links", str(tmp_path), "--no-index"]).index
    assert "trl" in row.ON_CPU_TORCH
    got = row.resolve_row("trl", "latest", index=index)
    assert (got.version, got.newest) == ("1.16.0", None)
    assert row.resolution_log(got) == ["trl: latest resolves to 1.16.0 (installing trl==1.16.0)"]
    assert versions.resolve("trl", "latest", index=index).version == "1.15.0"  # judged with its dependencies


def test_cpu_torch_overrides_repeat_until_no_gpu_only_package_is_left(tmp_path: Path) -> None:
    torch = tmp_path / "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"
    resolutions = iter(["numpy==2\nnvidia-a==1\ntriton==3\n", "numpy==2\ncuda-b==1\n", "numpy==2\n"])
    seen: list[str] = []

    def compile_with(overrides: str) -> str:
        seen.append(overrides)
        return next(resolutions)

    overrides, dropped = row.cpu_torch_overrides(torch, compile_with)
    assert dropped == ["cuda-b", "nvidia-a", "triton"]
    assert overrides == seen[-1] == versions.cpu_overrides(torch, dropped)
    assert seen[0] == versions.cpu_overrides(torch) and len(seen) == 3


def test_cpu_torch_overrides_give_up_naming_what_they_dropped(tmp_path: Path) -> None:
    names = iter(f"nvidia-{n}==1\n" for n in "abcdef")
    with pytest.raises(
        VersionError, match=r"GPU-only packages remain after dropping \['nvidia-a', 'nvidia-b'\]"
    ):
        row.cpu_torch_overrides(tmp_path / "torch.whl", lambda _: next(names), rounds=2)


def test_a_reused_environment_is_emptied_of_every_frozen_distribution() -> None:
    freeze = "numpy==2.3.5\nstacktok @ file:///work\n-e file:///x\ntokenizers==0.15.2\n# note\n"
    assert row.frozen_names(freeze) == ["numpy", "stacktok", "tokenizers"]


def test_the_installed_check_passes_only_for_the_resolved_release() -> None:
    version = pytest.__version__
    for v, ok in ((version, True), ("0.0.1", False)):
        code = row.installed_check(Resolved("pytest", v, v, f"pytest=={v}"))
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
        assert (done.returncode == 0) == ok, done.stderr
    assert "installed " + version + ", resolved 0.0.1" in done.stderr
    assert "'llama_cpp_python'" in row.installed_check(Resolved("llama-cpp-python", "x", "0.3.36", "x"))


def test_the_usage_names_every_package_flag() -> None:
    usage = row.usage()
    assert usage.startswith("Usage: nox -s conformance -- ")
    assert all(f"[--{name} V|latest|WHEEL]" in usage for name in versions.PACKAGES)
