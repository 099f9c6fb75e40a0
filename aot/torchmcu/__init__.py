"""torchmcu: PyTorch models compiled ahead of time into microcontroller firmware.

    import torchmcu
    torchmcu.compile(model, example_inputs, "mps3-an547", "build/model")
"""

__version__ = "0.1.0"

# The custom ops an exported program (model.pt2) may hold are registered with
# torch on `import torchmcu`, so that `run --check`, in a process that never
# compiled, loads the program: torchmcu::attention_softmax (int8 attention).
from .frontend import attention as _attention  # noqa: E402,F401


def compile(*args, **kwargs):  # noqa: A001 - the natural name, as torch.compile
    """Compile a model into a build directory; see torchmcu.compiler.compile."""
    from .compiler import compile as _compile

    return _compile(*args, **kwargs)
