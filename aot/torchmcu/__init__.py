"""torchmcu: PyTorch models compiled ahead of time into microcontroller firmware.

    import torchmcu
    torchmcu.compile(model, example_inputs, "mps3-an547", "build/model")
"""

__version__ = "0.1.0"

# No torch here: `build` and `run` start without it (about 3 s a process).
# Whatever loads a saved program registers torchmcu's custom ops first
# (sim/runner.py: _load_exported).


def compile(*args, **kwargs):  # noqa: A001 - the natural name, as torch.compile
    """Compile a model into a build directory; see torchmcu.compiler.compile."""
    from .compiler import compile as _compile

    return _compile(*args, **kwargs)
