"""Backend versions from the command line: flags, explicit ``latest`` resolution, the CPU torch overrides.

``latest`` is resolved by the real uv against a local ``--find-links`` directory of tiny
wheels, so the test can "release" a newer version and see the next resolution pick it.
Out of scope: installing and running a row (``nox -s conformance``).
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

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
