"""`tcnumerics probe ...`: listing and sources work anywhere; GPU commands fail in one line without a GPU."""

import importlib.util

import pytest

import tcnumerics as tc
from tcnumerics.cli import main

HAS_CUPY = importlib.util.find_spec("cupy") is not None


def test_targets_lists_every_hopper_entry_with_its_ptx(capsys):
    assert main(["probe", "targets"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(tc.instructions("hopper"))
    row = next(line for line in lines if line.startswith("hopper.wgmma.m64n8k32.f32.e4m3.e5m2\t"))
    assert "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e5m2" in row and "B smem" in row


def test_source_prints_one_instruction(capsys):
    assert main(["probe", "source", "hopper.mma.sp.m16n8k32.f32.bf16.bf16.f32"]) == 0
    out = capsys.readouterr().out
    assert out.count("mma.sp::ordered_metadata.sync.aligned.m16n8k32.row.col.f32.bf16.bf16.f32") == 1


@pytest.mark.parametrize("argv", [["probe", "source", "hopper.mma.m99n8k16.f32.f16.f16.f32"],
                                  ["probe", "targets", "--arch", "nosuch"],
                                  ["probe", "capture", "-o", "x"],
                                  ["probe"]])
def test_bad_input_is_one_line_and_exit_2(argv, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:")


@pytest.mark.skipif(HAS_CUPY, reason="CuPy installed: the GPU path is exercised on the device instead")
@pytest.mark.parametrize("argv", [["probe", "check", "hopper.mma.m16n8k16.f32.bf16.bf16.f32"],
                                  ["probe", "capture", "hopper.mma.m16n8k16.f32.bf16.bf16.f32", "-o", "OUT"]])
def test_gpu_commands_without_cupy_fail_cleanly(argv, capsys, tmp_path):
    argv = [str(tmp_path) if a == "OUT" else a for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "CuPy" in err and len(err.strip().splitlines()) == 1
    assert not list(tmp_path.iterdir())  # nothing half-written


def test_capture_never_overwrites(tmp_path, capsys):
    existing = tmp_path / "mma_m16n8k16_f32_bf16_bf16_f32.npz"
    existing.write_bytes(b"keep me")
    assert main(["probe", "capture", "hopper.mma.m16n8k16.f32.bf16.bf16.f32", "-o", str(tmp_path)]) == 2
    assert existing.read_bytes() == b"keep me"
    assert "--overwrite" in capsys.readouterr().err


def test_gpu_dot_without_cupy_raises_a_clear_error():
    if HAS_CUPY:
        pytest.skip("CuPy installed")
    from tcnumerics.probe import gpu_dot
    from tcnumerics.probe.runtime import ProbeError

    with pytest.raises(ProbeError, match="CuPy"):
        gpu_dot("hopper.mma.m16n8k16.f32.bf16.bf16.f32")
