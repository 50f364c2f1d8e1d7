"""The calibration model: network, settings, training loop, seed ensemble (pooling, recalibration), model files, prediction."""
