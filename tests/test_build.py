"""The C sources build with clang too (as `make fuzz` builds them: -Wall -Wextra -Werror),
not only with gcc: clang warns about things gcc lets pass, such as an initializer that
leaves fields out (-Wmissing-field-initializers), and -Werror makes that a failed build."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from conftest import REPO


@pytest.mark.skipif(not (shutil.which("clang") and shutil.which("cmake")),
                    reason="needs clang and cmake")
def test_c_sources_build_with_clang(tmp_path):
    env = dict(os.environ, CC="clang")
    conf = subprocess.run(["cmake", "-S", REPO, "-B", tmp_path, "-DCMAKE_BUILD_TYPE=Debug"],
                          env=env, capture_output=True, text=True)
    assert conf.returncode == 0, conf.stdout + conf.stderr
    build = subprocess.run(["cmake", "--build", tmp_path, "-j2"], env=env,
                           capture_output=True, text=True)
    errors = [ln for ln in (build.stdout + build.stderr).splitlines() if "error" in ln]
    assert build.returncode == 0, "\n".join(errors[:20]) or build.stdout + build.stderr
