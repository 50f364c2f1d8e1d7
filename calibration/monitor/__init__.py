"""`role-rubric monitor`: a chatbot in production, window by window (calibration/monitor/run.py); the windows
(windows.py), one window's record (record.py), what is measured (statistics.py), the alarms and their guarantee
(alarms.py), the state kept between runs (state.py)."""

from calibration.monitor.run import monitor

__all__ = ["monitor"]
