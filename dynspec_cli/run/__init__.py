"""The steps of a run that every placement uses: profiles (what to start), records (what was
started, kept on the host) and ownership, starting a detached server, watching it and stopping it.
Where a run is placed (a host, a group, a Slurm job) is place/'s."""
