"""Layer 4, build machinery: notebook runner, report, calibration table, benchmark, the section registry."""
