"""The llama.cpp of the real-server tests is built for a portable x86-64 baseline: no AMX, no AVX-512.

A build for the host CPU (``GGML_NATIVE`` on) used AMX tiles and died with a general protection fault at
``ldtilecfg`` on CI hosts whose CPU advertises AMX that the virtual machine does not permit. This test
disassembles the installed CPU backend and looks for those instructions. It first disassembles a known
``ldtilecfg`` and a known AVX-512 ``vaddps %zmm`` so that a disassembler blind to them cannot pass it.
"""

from __future__ import annotations

import importlib.util
import platform
import re
import shutil
import subprocess
from pathlib import Path

import pytest

AMX = re.compile(r"\s(ldtilecfg|sttilecfg|tileloadd|tileloaddt1|tilestored|tilezero|tilerelease|tdpb[a-z]+)\s")
AVX512_REGISTER = re.compile(r"%zmm\d+|%k[1-7]\b")


def _disassemble(path: Path, *args: str) -> str:
    objdump = shutil.which("objdump")
    if objdump is None:
        pytest.fail("objdump (Debian's binutils) is needed to check the llama.cpp build: apt-get install binutils",
                    pytrace=False)
    return subprocess.run([objdump, "-d", "--no-show-raw-insn", *args, str(path)], capture_output=True,
                          text=True, check=True).stdout


def _ggml_cpu_library() -> Path:
    spec = importlib.util.find_spec("llama_cpp")
    if spec is None or not spec.submodule_search_locations:
        pytest.fail("llama_cpp is not installed: bash scripts/test.sh installs the server-test extra", pytrace=False)
    found = sorted(Path(next(iter(spec.submodule_search_locations))).rglob("libggml-cpu*.so*"))
    if not found:
        pytest.fail("no libggml-cpu shared library inside the installed llama_cpp package", pytrace=False)
    return max(found, key=lambda p: p.stat().st_size)


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="the AMX/AVX-512 check is for x86-64")
def test_the_disassembler_sees_amx_and_avx512(tmp_path: Path) -> None:
    code = tmp_path / "known.bin"
    code.write_bytes(bytes.fromhex("c4e2784900") + bytes.fromhex("62f17c4858c1"))  # ldtilecfg (%rax); vaddps zmm
    listing = _disassemble(code, "-D", "-b", "binary", "-m", "i386:x86-64")
    assert AMX.search(listing), listing
    assert AVX512_REGISTER.search(listing), listing


@pytest.mark.real_server  # reads the installed llama_cpp of the server-test extra, which the quick check leaves out
@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="the AMX/AVX-512 check is for x86-64")
def test_llama_cpp_cpu_backend_has_no_amx_or_avx512_instructions() -> None:
    listing = _disassemble(_ggml_cpu_library())
    assert "vfmadd" in listing  # the AVX2/FMA baseline is there (the disassembly is not empty)
    amx = sorted({m.group(1) for m in AMX.finditer(listing)})
    avx512 = sorted(set(AVX512_REGISTER.findall(listing)))[:5]
    assert not amx, f"AMX instructions in the llama.cpp CPU backend: {amx}; rebuild with scripts/setup.sh"
    assert not avx512, f"AVX-512 registers in the llama.cpp CPU backend: {avx512}; rebuild with scripts/setup.sh"
