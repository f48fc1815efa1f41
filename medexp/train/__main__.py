"""``python -m medexp.train``: train the differential pairs of the listed model configs."""

import hydra
from omegaconf import DictConfig

from medexp.config import conf_dir


@hydra.main(version_base="1.3", config_path=str(conf_dir() / "train"), config_name="train")
def main(cfg: DictConfig) -> None:
    from medexp.train.app import run_from_hydra

    run_from_hydra(cfg)


if __name__ == "__main__":
    main()
