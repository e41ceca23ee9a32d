"""gate pins a plugin's distribution like patched files: its code and the metadata that makes sglang
load it (entry_points.txt, METADATA, RECORD), found by the inspector in the server's python; a
reinstall of the plugin fails the gate, naming the file."""
import os
import time

import pytest

from dynspec_cli.knowledge.features import load_feature
from dynspec_cli.prove import receipt
from dynspec_cli.run import records
from dynspec_cli.transport.local import LocalHost
from tests.plugins.test_plugin_preflight import feature, install

pytestmark = pytest.mark.wheels


def test_gate_pins_the_plugins_code_and_metadata_and_fails_when_it_is_reinstalled(tmp_path):
    py = install(tmp_path, "0.5.12.post1")
    host = LocalHost()
    feat = load_feature(feature(tmp_path))
    files, note = receipt.find_patched_files(host, py, feat, [py, "-m", "sglang.launch_server", "--model-path", "/m"])
    site = f"{tmp_path}/venv-0.5.12.post1/lib/python3.11/site-packages"
    assert files == [f"{site}/dsd_plugin-0.2.dist-info/METADATA", f"{site}/dsd_plugin-0.2.dist-info/RECORD",
                     f"{site}/dsd_plugin-0.2.dist-info/entry_points.txt", f"{site}/dsd_plugin/__init__.py"]
    assert note.startswith("plugin 'dsd': dsd-plugin 0.2 (") and note.endswith("its code and metadata")
    # a receipt for this very process as the "server", so that only the files decide
    pid = os.getpid()
    doc = {"schema": receipt.SCHEMA, "created_at": time.time(), "live": True, "proven": True, "acceptance": {"provenance": "real"},
           "run": {"name": "r"}, "host": host.name,
           "server": {"pid": pid, "leader_start": records.leader_start(host, pid),
                      "cmdline_sha256": receipt.cmdline_sha256(host, pid), "boot_id": receipt.boot_id(host)},
           "patched_files": [{"path": p, "sha256": receipt.file_sha256(host, p), "source": "plugin"} for p in files]}
    assert "4 patched file(s) unchanged" in receipt.check(host, doc, max_age=None)
    install(tmp_path, "0.5.12.post1", dist_version="0.3")  # pip replaces 0.2 by 0.3
    with pytest.raises(receipt.GateFailed) as e:
        receipt.check(host, doc, max_age=None)
    assert str(e.value) == f"patched-files: {site}/dsd_plugin-0.2.dist-info/METADATA is missing or unreadable on {host.name}"
