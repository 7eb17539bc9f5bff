from __future__ import annotations

import numpy as np
import pytest

from tftrainers.networks import MIN_RESOLUTION, make_visual_encoder


@pytest.mark.parametrize("vis_encode_type", sorted(MIN_RESOLUTION))
def test_minimum_resolution_gives_the_encoding(vis_encode_type, rng):
    size = MIN_RESOLUTION[vis_encode_type]
    encoder = make_visual_encoder(vis_encode_type, (size, size + 3, 2), output_size=8)
    images = rng.random((3, size, size + 3, 2), dtype=np.float32)
    out = encoder(images).numpy()
    assert out.shape == (3, 8)
    assert np.all(np.isfinite(out))


@pytest.mark.parametrize("vis_encode_type", sorted(MIN_RESOLUTION))
def test_below_minimum_resolution_is_rejected(vis_encode_type):
    size = MIN_RESOLUTION[vis_encode_type]
    with pytest.raises(ValueError) as error:
        make_visual_encoder(vis_encode_type, (size + 5, size - 1, 1), output_size=8,
                            obs_name="camera")
    message = str(error.value)
    assert vis_encode_type in message
    assert f"{size}x{size}" in message
    assert f"{size + 5}x{size - 1}" in message
    assert "camera" in message


def test_unknown_encoder_type_is_rejected():
    with pytest.raises(ValueError, match="unknown vis_encode_type 'match4'.*nature_cnn"):
        make_visual_encoder("match4", (84, 84, 3), output_size=8)
