"""Runs lmms-eval itself on an exported task: its task loader reads the task folder
``python -m medexp.export format=lmms_eval`` wrote, its evaluator asks a model (the demo answering
model, through the same transformers code as demo_model_harness.py) and its EvaluationTracker
writes the results and the ``--log_samples`` file, as ``lmms-eval --include_path <export>
--tasks <task> --log_samples --output_path <out>`` does. Needs lmms-eval importable (the
``harness`` marker's test installs it into a side folder); imports no medexp code.

    python tests/harness/lmms_eval_run.py <export folder> <model folder> <output folder>
"""

import sys
from pathlib import Path

import torch
from lmms_eval import evaluator
from lmms_eval.api.model import lmms
from lmms_eval.loggers import EvaluationTracker
from lmms_eval.tasks import TaskManager

sys.path.insert(0, str(Path(__file__).resolve().parent))
from demo_model_harness import Model  # noqa: E402


class DemoModel(lmms):
    """An lmms-eval model answering generate_until requests with the demo model, one at a time."""

    def __init__(self, folder: str):
        super().__init__()
        self.model = Model(folder)

    def generate_until(self, requests):
        replies = []
        for request in requests:
            context, generation, doc_to_visual, doc_id, task, split = request.args
            visuals = doc_to_visual(self.task_dict[task][split][doc_id])
            replies.append(self.model.ask(context, visuals[0] if visuals else None, generation["max_new_tokens"]))
        return replies

    def loglikelihood(self, requests):
        raise NotImplementedError("an exported task generates")

    def generate_until_multi_round(self, requests):
        raise NotImplementedError("an exported task asks one round")


def main(export: str, model_folder: str, output: str) -> None:
    torch.set_num_threads(1)
    manager = TaskManager(include_path=export, include_defaults=False)
    task = next(name for name in manager.all_tasks if name.startswith("medexp_"))
    results = evaluator.simple_evaluate(model=DemoModel(model_folder), tasks=[task], task_manager=manager,
                                        log_samples=True, batch_size=1)
    samples = results.pop("samples")
    tracker = EvaluationTracker(output_path=output)
    tracker.general_config_tracker.model_name_sanitized = "demo_model"
    tracker.save_results_aggregated(results=results, samples=samples, datetime_str="20261128_000000")
    for name in results["configs"]:
        tracker.save_results_samples(task_name=name, samples=samples[name])
    print(task, results["results"][task])


if __name__ == "__main__":
    main(*sys.argv[1:4])
