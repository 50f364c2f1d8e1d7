"""Human labels in and out: Label Studio tasks and exports, and the plain labelling sheet.

- `items`: the turns to label (all, or those a suggest sheet or sample plan names), the conversation so far
  as messages, the check that a labelled turn still says what the reviewer saw, and llm.csv's turns.
- `answers`: every answer checked against the rubric, and the labelled dataset folder written.
- `label_studio`: the labelling config made from rubric.yaml, tasks, and a Label Studio JSON export read
  into labels.csv rows; `label_studio_api`: the same over Label Studio's REST API.
- `sheet`: the CSV sheet `suggest` writes and `import source=sheet` reads back.

The commands `role-rubric label-studio` and `role-rubric import` are calibration/commands/label_studio.py and
import_.py.
"""

from calibration.labelling.items import conversation_messages, read_selection
from calibration.labelling.label_studio import label_config, make_tasks
from calibration.labelling.label_studio_export import label_studio_labels

__all__ = ["conversation_messages", "label_config", "label_studio_labels", "make_tasks", "read_selection"]
