"""configs/sglang/modules.toml [[override]] rows checked against every published sglang wheel:
the overrides tests/tools/mine_overrides.py reads from a release's source (ast, never imported)
are exactly the rows covering that release, so a release that starts (or stops) skipping a
base's method fails here. The hand-read cases at the end are what a person reading the named
files sees."""
from __future__ import annotations

import pytest

from dynspec_cli.engines.sglang.knowledge import knowledge
from tests.tools import mine_overrides as mine

pytestmark = pytest.mark.wheels

K = knowledge()


def table(version: str) -> dict[tuple[str, str], tuple[str | None, bool]]:
    m = K.mask_of(version)
    return {(o.cls, o.method): (o.calls or None, o.conditional) for o in K.overrides if K.mask(o.versions) & m}


@pytest.mark.parametrize("version", K.releases)
def test_override_rows_are_the_wheels_overrides(version):
    wheel = mine.overrides(version, K)
    rows = table(version)
    assert {k: v for k, v in rows.items() if k not in wheel} == {}, f"rows with no such override in {version}"
    assert {k: v for k, v in wheel.items() if rows.get(k) != v} == {}, f"overrides of {version} the rows miss or misstate"


@pytest.mark.parametrize("version, running, patched, method, expected", [
    # 0.5.9 standalone_worker.py: StandaloneWorker.__init__ calls TpModelWorker.__init__(self, ...)
    # (line 76), skipping EAGLEWorker.__init__
    ("0.5.9", "StandaloneWorker", "EAGLEWorker", "__init__", (False, "StandaloneWorker")),
    # 0.5.16 standalone_worker_v2.py: StandaloneWorkerV2.__init__ sets its fields and builds
    # StandaloneDraftWorker itself; no super().__init__ at all
    ("0.5.16", "StandaloneWorkerV2", "EAGLEWorkerV2", "__init__", (False, "StandaloneWorkerV2")),
    # 0.5.17 standalone_worker_v2.py line 148: BaseSpecWorker.__init__(self) -- past EAGLEWorkerV2
    ("0.5.17", "StandaloneWorkerV2", "EAGLEWorkerV2", "__init__", (False, "StandaloneWorkerV2")),
    ("0.5.17", "StandaloneWorkerV2", "BaseSpecWorker", "__init__", (True, None)),
    # 0.5.3.post2 eagle_worker_v2.py: class EAGLEWorkerV2(EAGLEWorker), __init__ calls super().__init__(
    ("0.5.3.post2", "EAGLEWorkerV2", "EAGLEWorker", "__init__", (True, None)),
    # a method StandaloneWorkerV2 does not define runs the base's
    ("0.5.16", "StandaloneWorkerV2", "EAGLEWorkerV2", "forward_batch_generation", (True, None)),
])
def test_hand_read_reachability(version, running, patched, method, expected):
    assert K.method_reaches(version, running, patched, method) == expected


def test_override_kinds_on_source():
    import ast

    src = '''
class C(B):
    def __init__(self, x):
        if x:
            super().__init__(x)
    def step(self):
        with lock:
            B.step(self)
    def run(self):
        self.other()
'''
    cd = ast.parse(src).body[0]
    fns = mine.methods(cd)
    after = ["B", "A"]
    assert mine.override_kind(fns["__init__"], after) == ("B", True)
    assert mine.override_kind(fns["step"], after) == ("B", False)
    assert mine.override_kind(fns["run"], after) == (None, False)
