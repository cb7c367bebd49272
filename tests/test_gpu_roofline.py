"""The bandwidth-bound time per step that docs/gpu.md tabulates and scripts/check_gpu.py prints."""
from sru.ops.triton.roofline import HBM_GBPS, gpu_key, predicted_us, step_bytes, table


def test_step_bytes_count_every_stream_once():
    # B=1, d=1, fp32: inference reads u0,u1,u2 and x, writes h = 5 * 4 bytes; the training
    # forward adds the fp32 c history; the backward reads grad_h, U (3), x and c, and writes
    # grad_U (3) and grad_x: 9 values in U's dtype and the fp32 c (40 bytes).
    assert step_bytes(1, 1, False, 4) == dict(inference=20, forward=24, backward=40)
    assert step_bytes(2, 3, True, 2)["inference"] == 2 * 3 * 2 * 10


def test_prediction_is_bytes_over_hbm_bandwidth():
    assert abs(predicted_us(int(HBM_GBPS["H100"] * 1e3), "H100") - 1.0) < 1e-12
    assert gpu_key("NVIDIA H200") == "H200" and gpu_key("NVIDIA H100 80GB HBM3") == "H100"
    assert table().count("\n") == 2 + 6 - 1
