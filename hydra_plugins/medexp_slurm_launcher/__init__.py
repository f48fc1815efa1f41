"""``hydra/launcher=submitit_slurm``: the Slurm launcher with a bounded wait (see :mod:`.medexp_slurm_launcher`)."""
