"""``python -m medexp``: compose one cell (model x bench x detector x control) and run it."""

import sys

from omegaconf import DictConfig

from medexp.config import conf_dir
from medexp.config.help import hydra_main


@hydra_main(config_path=str(conf_dir()), config_name="config")
def main(cfg: DictConfig) -> None:
    from medexp.runner.entry import run_from_hydra

    run_from_hydra(cfg)


def run() -> None:
    """:func:`main`, with a signal that reaches here (a sweep's driving process: a single cell
    handles its own) ending the sweep's runs and the command with 128 + the signal's number."""
    from medexp.runner.signals import Interrupted

    try:
        main()
    except (Interrupted, KeyboardInterrupt) as error:
        from medexp.runner.sweep import stopped_by

        sys.exit(stopped_by(error))


if __name__ == "__main__":
    run()
