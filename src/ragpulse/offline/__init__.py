"""Work on files, away from the live app: batch evaluation, threshold calibration, agreement."""
