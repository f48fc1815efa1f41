"""``python -m medexp.train`` reads conf/ too: the model and tracking groups a cell uses.

The training app's own configs live in conf/train/ (its primary config and its experiment
presets, which the main app's presets would otherwise collide with). Hydra calls this plugin for
every app; when the app's primary config directory is conf/train/ it appends conf/, so that both
the app's composition and ``medexp.config.model_config`` (Hydra's compose API inside the running
app) find ``model=<name>`` exactly as ``python -m medexp`` does. Other apps are left alone.
"""

from pathlib import Path

from hydra.core.config_search_path import ConfigSearchPath
from hydra.plugins.search_path_plugin import SearchPathPlugin


class MedexpTrainSearchPath(SearchPathPlugin):
    def manipulate_search_path(self, search_path: ConfigSearchPath) -> None:
        from medexp.config import conf_dir

        train_dir = (conf_dir() / "train").resolve()
        for element in search_path.get_path():
            location = str(element.path or "").removeprefix("file://")
            if element.provider == "main" and location and Path(location).resolve() == train_dir:
                search_path.append("medexp", f"file://{conf_dir()}")
                return
