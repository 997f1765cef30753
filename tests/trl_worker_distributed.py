"""Worker for tests/test_trl_distributed.py: `torchrun --nproc_per_node 2 tests/trl_worker_distributed.py OUT_DIR`.

Each rank trains the WMRL trainer for 2 steps on CPU (gloo) and writes OUT_DIR/rank<r>.json with its corrector
state, its correction history and the keys/anchor flags of its own rows. 3 groups of 4 rows over 2 ranks of 6 rows
each: the middle group is split across the ranks.
"""
import json
import os
import sys
from pathlib import Path

from datasets import Dataset
from trl import GRPOConfig

from wmrl.adapters.completions import menu_program
from wmrl.adapters.task_scorer import TaskScorer
from wmrl.adapters.trl_adapter import make_wmrl_trainer_class
from wmrl.core.correction import CorrectionConfig, WMRLCorrector
from wmrl.execution.tasks import load_task
from wmrl.world_model.static import StaticWorldModel

REPO = Path(__file__).resolve().parent.parent
MENU = ["good_uniform_baseline", "bad_syntax_missing_paren", "bad_imports_not_installed", "good_hard_labels_onehot"]


def main(out_dir: str, policy_dir: str) -> None:
    out = Path(out_dir)
    iris = load_task(REPO / "toy/tasks/iris")
    menu = [(REPO / f"toy/solutions/iris/{name}.py").read_text() for name in MENU]
    tasks = {f"iris-{k}": iris for k in range(6)}  # six task ids sharing one folder: distinct group keys
    dataset = Dataset.from_list([{"prompt": f"Task {k}: write a solution.", "task_id": f"iris-{k}"} for k in range(6)])
    args = GRPOConfig(output_dir=str(out / "trainer"), per_device_train_batch_size=6, num_generations=4, max_steps=2,
                      max_completion_length=8, learning_rate=1e-4, use_cpu=True, bf16=False, report_to="none",
                      logging_steps=1, save_strategy="no", seed=0, gradient_checkpointing=False)
    config = CorrectionConfig(method="wmrl", anchor_fraction=0.5, min_pairs=2, refit_every=1, warmup=1)
    trainer = make_wmrl_trainer_class()(policy_dir, args=args, train_dataset=dataset,
                                        scorer=TaskScorer(tasks, StaticWorldModel(), program=menu_program(menu)),
                                        corrector=WMRLCorrector(config))
    trainer.train()
    rank = trainer.accelerator.process_index
    record = {"rank": rank, "world_size": trainer.accelerator.num_processes,
              "state": trainer.corrector.state_dict(), "history": trainer.wmrl_history,
              "losses": [h["loss"] for h in trainer.state.log_history if "loss" in h]}
    (out / f"rank{rank}.json").write_text(json.dumps(record))
    trainer.accelerator.wait_for_everyone()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
    # Leave without interpreter teardown: gloo's and the scorer's native threads can abort the process at exit
    # ("terminate called without an active exception") after all the work is done and written.
    import torch.distributed as dist
    if dist.is_initialized():
        dist.destroy_process_group()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
