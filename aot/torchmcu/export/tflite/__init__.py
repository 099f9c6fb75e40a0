"""A compiled program as a TensorFlow Lite model, and TensorFlow Lite Micro
as an independent oracle for it (export.py says how each op maps)."""

from .export import ExportError, export_op, export_tflite, run_tflite_micro, summary, trace, verify_derived

__all__ = ["ExportError", "export_op", "export_tflite", "run_tflite_micro", "summary", "trace", "verify_derived"]
