"""Exports of a compiled model for other tools and build systems: a .tflite
model (tflite/), an Arduino library (arduino.py), a CMSIS-Pack (pack.py)."""
