"""Runs of a patched server: profiles (what to start), records (what was started, kept on the
host), launching, watching and stopping."""
