from tests.support.slurm import slurm, slurm_cluster  # noqa: F401  (a real two-node Slurm, session-scoped)
