"""Token counting: the offline encoding, the counter, the calibration to providers."""
