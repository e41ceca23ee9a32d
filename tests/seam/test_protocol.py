"""Every registered placement offers the contract of dynspec_cli/place/protocol.py (as pytest checks
its hook implementations against hookspec.py): every module-level name, each function with the
stub's parameters, typed Options, and a placement class with every method of the Placement
protocol, same parameters."""
from __future__ import annotations

import importlib
import inspect
import pkgutil

import msgspec
import pytest

from dynspec_cli import place
from dynspec_cli.place import protocol


def _params(fn) -> list[tuple[str, object]]:
    return [(p.name, p.kind) for p in inspect.signature(fn).parameters.values()]


def _placement_classes(member) -> list[type]:
    """The classes of the member's folder that the sequence drives (named ...Placement)."""
    out = []
    for info in pkgutil.iter_modules(member.__path__, member.__name__ + "."):
        mod = importlib.import_module(info.name)
        out += [c for n, c in vars(mod).items() if isinstance(c, type) and n.endswith("Placement")
                and c.__module__ == mod.__name__]
    return out


@pytest.mark.parametrize("kind", list(place.KINDS))
def test_member_offers_the_protocol(kind):
    member = place.get(kind)
    assert member.__path__, f"{kind}: a placement is a folder (place/{kind}/)"
    for name in protocol.MODULE:
        assert hasattr(member, name), f"{kind} lacks {name} (place/protocol.py)"
        stub = getattr(protocol, name)
        if inspect.isfunction(stub):
            assert _params(getattr(member, name)) == _params(stub), f"{kind}.{name}: not the stub's parameters"
    assert issubclass(member.Options, msgspec.Struct), f"{kind}.Options: a msgspec Struct (typed options)"
    msgspec.convert({}, member.Options)  # every option has a default
    assert member.SCHEDULER is None or isinstance(member.SCHEDULER, str)
    classes = _placement_classes(member)
    assert classes, f"{kind}: no placement class (...Placement) in its folder"
    for cls in classes:
        for name in protocol.PLACEMENT:
            stub = getattr(protocol.Placement, name, None)
            if inspect.isfunction(stub):
                assert _params(getattr(cls, name)) == _params(stub), f"{cls.__name__}.{name}: not the protocol's"
            else:  # an attribute each instance sets
                assert name in inspect.getsource(cls.__init__), f"{cls.__name__} never sets {name}"
        for name in protocol.OPTIONAL:
            if hasattr(cls, name):
                assert _params(getattr(cls, name)) == _params(getattr(protocol.Placement, name)), name


def test_the_registry_is_one_line_per_member():
    """A new member is one line of KINDS (tests/seam/test_toy_placement.py adds one so)."""
    src = inspect.getsource(place)
    block = src[src.index("KINDS = {"):src.index("}", src.index("KINDS = {"))]
    assert [ln.strip() for ln in block.splitlines()[1:]] == [f'"{k}": "{m}",' for k, m in place.KINDS.items()]


def test_an_option_only_another_placement_takes_is_one_line():
    from dynspec_cli.run.control import RunError

    with pytest.raises(RunError, match=r'^--dry-run: only for profiles with scheduler = "slurm"$'):
        place.options(place.get("host"), dry_run=True)
    with pytest.raises(RunError, match=r"^--force: only for profiles with hosts = \[\.\.\.\]$"):
        place.options(place.get("host"), force=True)
    opts = place.options(place.get("group"), force=True, node_env=["1:A=b"], dist_init_addr=None, dry_run=False)
    assert (opts.force, opts.node_env, opts.dist_init_addr) == (True, ["1:A=b"], None)
