"""The Python API: `RoleAdherence` (calibration/api/role_adherence.py) scores a conversation's role adherence,
calibrated to human judges; its results (`AdherenceResult`, `TurnResult`: results.py), its argument checks
(inputs.py) and the frames `role-rubric score` writes from them (frames.py). The public path is this
package: `from calibration.api import RoleAdherence`.
"""

from calibration.api.results import AdherenceResult, TurnResult
from calibration.api.role_adherence import RoleAdherence
from calibration.model.shift import ShiftWarning

__all__ = ["AdherenceResult", "RoleAdherence", "ShiftWarning", "TurnResult"]
