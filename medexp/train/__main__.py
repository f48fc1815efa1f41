"""``python -m medexp.train``: train the differential pairs of the listed model configs."""

from omegaconf import DictConfig

from medexp.config import conf_dir
from medexp.config.help import hydra_main


@hydra_main(config_path=str(conf_dir() / "train"), config_name="train")
def main(cfg: DictConfig) -> None:
    from medexp.train.app import run_from_hydra

    run_from_hydra(cfg)


if __name__ == "__main__":
    main()
