"""The outputs layer: exporters, delivery, files and the process-exit hooks."""
