"""Calibration data for a streaming model (compile(..., state=N)).

A streaming model takes one frame and its state and returns its output and
the next state (`forward(x_frame, h, c) -> (y, h, c)`). Quantizing it needs
samples of what it meets when it runs: each frame of the calibration
sequences with the state the frames before it left. `stream_calibration`
runs the float model over whole sequences, frame by frame, and collects
exactly those (frame, *state) samples. Calibrated on the frames of the same
sequences, the streaming program and the whole-sequence program get the same
quantization, so fed one frame per invocation it gives the sequence model's
outputs bit for bit (tests/test_streaming.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import torch


def stream_calibration(model: torch.nn.Module, sequences: Iterable[torch.Tensor],
                       initial_state: Sequence[torch.Tensor], time_dim: int = 1) -> list[tuple[torch.Tensor, ...]]:
    """(frame, *state) samples for a model whose last len(initial_state)
    inputs and outputs are its state: every frame of every sequence (frames
    are slices of length 1 along time_dim), each with the state the float
    model reached after the frames before it in its sequence."""
    samples: list[tuple[torch.Tensor, ...]] = []
    n = len(initial_state)
    model = model.eval()
    with torch.no_grad():
        for seq in sequences:
            state = [s.clone() for s in initial_state]
            for t in range(seq.shape[time_dim]):
                frame = seq.narrow(time_dim, t, 1).clone()
                samples.append((frame, *state))
                out = torch.utils._pytree.tree_leaves(model(frame, *state))
                state = [o.clone() for o in out[len(out) - n:]]
    return samples
