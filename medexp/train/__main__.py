"""``python -m medexp.train``: train the differential pairs of the listed model configs."""

import hydra
from omegaconf import DictConfig

from medexp.config import conf_dir, prepare_hydra

prepare_hydra()  # the schemas and resolvers the config names, before Hydra composes it


@hydra.main(version_base="1.3", config_path=str(conf_dir() / "train"), config_name="train")
def main(cfg: DictConfig) -> None:
    from medexp.train.app import run_from_hydra

    prepare_hydra()  # again in a launcher's worker process, which composes nothing but resolves the config
    run_from_hydra(cfg)


if __name__ == "__main__":
    main()
