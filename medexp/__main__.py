"""``python -m medexp``: compose one cell (model x bench x detector x control) and run it."""

import hydra
from omegaconf import DictConfig

from medexp.config import conf_dir


@hydra.main(version_base="1.3", config_path=str(conf_dir()), config_name="config")
def main(cfg: DictConfig) -> None:
    from medexp.runner.entry import run_from_hydra

    run_from_hydra(cfg)


if __name__ == "__main__":
    main()
