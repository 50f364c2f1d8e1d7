"""Human labels in and out: the turns to label, answers checked, the labelling sheet, and trace annotations.

- `items`: the turns to label (all, or those a suggest sheet or sample plan names), the conversation so far
  as messages, the check that a labelled turn still says what the reviewer saw, and llm.csv's turns.
- `answers`: every answer checked against the rubric, and the labelled dataset folder written.
- `sheet`: the CSV sheet `suggest` writes and `import source=sheet` reads back.
- `annotations`: reviewers' annotations stored beside traces (MLflow, Phoenix) -> labels.

Label Studio (its labelling config, tasks, export and REST API) is calibration/connectors/label_studio/. The
commands `role-rubric label-studio` and `role-rubric import` are calibration/commands/label_studio.py and
import_.py.
"""

from calibration.labelling.items import conversation_messages, read_selection

__all__ = ["conversation_messages", "read_selection"]
