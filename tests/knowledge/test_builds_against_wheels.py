"""configs/sglang/modules.toml [[builds]] rows against the published wheels: in every release of a
row, the worker's own __init__ assigns `self._draft_worker` an expression that constructs the
row's draft class; in the release just outside, it does not (or the worker is not there)."""
from __future__ import annotations

import ast

import pytest

from dynspec_cli.engines.sglang.knowledge import knowledge
from tests.support import wheels

pytestmark = pytest.mark.wheels

K = knowledge()


def built(version: str, worker: str) -> set[str]:
    """The classes `worker.__init__` constructs into self._draft_worker in `version`'s wheel."""
    row = K.class_row(version, worker)
    module = row.module if row else K.module_of_class(worker)
    p = wheels.unpacked(version) / ("sglang/srt/speculative/" + module.replace(".", "/") + ".py")
    if not p.is_file():
        return set()
    cls = next((n for n in ast.parse(p.read_bytes()).body if isinstance(n, ast.ClassDef) and n.name == worker), None)
    init = next((f for f in (cls.body if cls else []) if isinstance(f, ast.FunctionDef) and f.name == "__init__"), None)
    out = set()
    for node in ast.walk(init) if init else ():
        if isinstance(node, ast.Assign) and any(ast.unparse(t) == "self._draft_worker" for t in node.targets):
            out |= {ast.unparse(c.func) for c in ast.walk(node.value) if isinstance(c, ast.Call)}
    return out


CASES = [(b.worker, b.draft, b.versions, v) for b in K.builds for v in K.versions_in(K.mask(b.versions))]


@pytest.mark.parametrize("worker,draft,versions,version", CASES, ids=[f"{w}-{v}" for w, _, _, v in CASES])
def test_worker_builds_that_draft_worker(worker, draft, versions, version):
    assert draft in built(version, worker), f"{worker}.__init__ of {version} builds {built(version, worker)}"


def test_release_before_each_row_builds_nothing_of_it():
    for b in K.builds:
        first = K.versions_in(K.mask(b.versions))[0]
        i = K.releases.index(first)
        if i:
            assert b.draft not in built(K.releases[i - 1], b.worker), (b.worker, K.releases[i - 1])


@pytest.mark.parametrize("running, draft", [
    # 0.5.12.post1 eagle_worker_v2.py:682 `self._draft_worker = EagleDraftWorker(`
    ("EAGLEWorkerV2", "EagleDraftWorker"),
    # standalone_worker_v2.py:171: StandaloneWorkerV2.__init__ (no super().__init__) builds its own
    ("StandaloneWorkerV2", "StandaloneDraftWorker"),
    # multi_layer_eagle_worker_v2.py:627
    ("MultiLayerEagleWorkerV2", "MultiLayerEagleDraftWorker"),
    # eagle_worker.py:91 `class EAGLEWorker(TpModelWorker)`: the V1 worker is the draft model worker itself
    ("EAGLEWorker", None),
])
def test_hand_read_draft_of_0512post1(running, draft):
    assert K.draft_of("0.5.12.post1", running) == draft
