"""Session fixtures for the real-sglang tier: the envs are built here (cached, so a warm run costs nothing)."""
from __future__ import annotations

import time

import pytest

from tests.support import sglang_env


@pytest.fixture(scope="session")
def real_envs():
    """{version: SglangEnv} for sglang_env.RELEASES, built (or reused) once per session."""
    t0 = time.monotonic()
    envs = sglang_env.build_all()
    print(f"\n[realsglang] envs ready in {time.monotonic() - t0:.1f}s under {sglang_env.cache_root()}")
    return envs


@pytest.fixture(scope="session")
def launcher_work(tmp_path_factory):
    return tmp_path_factory.mktemp("real-launcher")
