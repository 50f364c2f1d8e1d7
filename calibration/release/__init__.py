"""Release decisions: a release's adherence rate with intervals that hold however wrong the calibrator is
(prediction-powered inference), a comparison with a baseline release, a CI gate, and sampling plans."""

from calibration.release.estimate import estimate_release
from calibration.release.inference import ClusterSample, Interval, classical_mean, difference, ppi_mean

__all__ = ["ClusterSample", "Interval", "classical_mean", "difference", "estimate_release", "ppi_mean"]
