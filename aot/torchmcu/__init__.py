"""torchmcu: PyTorch models compiled ahead of time into microcontroller firmware."""

__version__ = "0.1.0"
