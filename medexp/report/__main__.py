"""``python -m medexp.report``: the claims-to-evidence map from the tracked runs (conf/report.yaml)."""

import hydra
from omegaconf import DictConfig

from medexp.config import conf_dir


@hydra.main(version_base="1.3", config_path=str(conf_dir()), config_name="report")
def main(cfg: DictConfig) -> None:
    from medexp.report.build import run_from_hydra

    run_from_hydra(cfg)


if __name__ == "__main__":
    main()
