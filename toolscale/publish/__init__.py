"""Publishing: the store as a self-contained Hugging Face dataset folder (`folder.py`, its card
`card.py`), its upload (`hub.py`), the check that a folder is what it claims (`verify.py`) and
that its runs make it again (`regenerate.py`), and
τ²-bench's layout (`tau2.py`).

Three configs, as Parquet shards under `data/<config>/<split>-NNNNN-of-NNNNN.parquet`, and two
more from a store with questions (`qa.py`):
- `tasks` (default): τ²-bench Task fields with nested objects as JSON text, plus toolscale's columns;
- `domains`: every domain's full spec and its databases' seeds and state hashes — enough to rebuild
  every database and replay every task without this repository;
- `sft`: one row per task, `messages` (the gold trajectory in the OpenAI chat format, as the
  oracle plays it) and `tools` (JSON): what TRL's SFTTrainer reads.
- `qa`: the question tasks, by split; `corpus`: the documents they are asked over.
Beside them: `README.md` (the dataset card) and `run_record.json` (configs and versions).
"""

from toolscale.publish.folder import build_folder
from toolscale.publish.hub import upload
from toolscale.publish.layout import PublishSummary, domain_rows
from toolscale.publish.verify import FolderCheck, verify_folder
from toolscale.synth.task import task_rows

__all__ = ["FolderCheck", "PublishSummary", "build_folder", "domain_rows", "task_rows", "upload", "verify_folder"]
