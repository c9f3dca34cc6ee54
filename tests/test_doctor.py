import subprocess
import sys

from conftest import HAS_GPU


def test_doctor_gives_a_verdict():
    proc = subprocess.run([sys.executable, "-m", "tilelang_tutorial", "doctor"], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    verdict = proc.stdout.strip().splitlines()[-1]
    assert verdict.startswith("VERDICT: ready")
    assert ("GPU mode" in verdict) == HAS_GPU and ("emulated mode" in verdict) == (not HAS_GPU)
    if not HAS_GPU:
        assert "ran it in the tile emulator: y == x + 1" in proc.stdout


def test_doctor_rejects_an_unknown_arch():
    import os

    env = dict(os.environ, TILELANG_TUTORIAL_ARCH="sm_61")
    proc = subprocess.run([sys.executable, "-m", "tilelang_tutorial", "doctor"], capture_output=True, text=True,
                          timeout=300, env=env)
    assert proc.returncode == 1 and "sm_61" in proc.stdout and "VERDICT: not ready" in proc.stdout


def test_doctor_prints_no_tilelang_info_lines():
    """TileLang logs INFO lines per compile; the tutorial quiets them (warnings still show)."""
    proc = subprocess.run([sys.executable, "-m", "tilelang_tutorial", "doctor"], capture_output=True, text=True,
                          timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    noise = [l for l in (proc.stdout + proc.stderr).splitlines() if ":INFO]" in l or "Warning" in l]
    assert not noise, noise
