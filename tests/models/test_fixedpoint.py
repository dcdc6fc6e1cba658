import numpy as np
import pytest
from hwcosim.models.fixedpoint import Q, acc_bits, dequantize, quantize, requantize


def test_init_and_ranges():
    q = Q(2, 6)
    assert (q.width, q.min_raw, q.max_raw, q.lsb) == (8, -128, 127, 1 / 64)
    assert str(q) == "Q2.6" and Q.parse("Q2.6") == q and Q.parse("4.12") == Q(4, 12)


@pytest.mark.parametrize("args", [(0, 4), (2, -1), (30, 10), (1.5, 2)])
def test_wrong_formats_are_refused(args):
    with pytest.raises(ValueError):
        Q(*args)


def test_parse_error_names_the_fix():
    with pytest.raises(ValueError, match="Q<int_bits>.<frac_bits>"):
        Q.parse("eight bits")


def test_quantize_rounds_ties_to_even_and_saturates():
    q = Q(2, 2)  # lsb 0.25, range [-2, 1.75]
    x = np.array([0.125, 0.375, -0.125, 1.9, -5.0, 1.75])
    assert quantize(x, q).tolist() == [0, 2, 0, 7, -8, 7]
    with pytest.raises(ValueError, match="NaN"):
        quantize(np.array([np.nan]), q)


def test_requantize_rounds_half_up_like_the_hardware():
    # src has 4 fraction bits; dst 2: shift 2 -> add 2, floor-divide by 4
    raw = np.array([2, 6, -2, -6, -7, 1000, -1000])
    out = requantize(raw, 4, Q(4, 2))
    assert out.tolist() == [1, 2, 0, -1, -2, 31, -32]
    assert np.array_equal(requantize(raw, 4, Q(6, 4)), raw.clip(-512, 511))
    assert requantize(np.array([3]), 0, Q(4, 2)).tolist() == [12]


def test_requantize_matches_float_rounding_reference():
    rng = np.random.default_rng(0)
    raw = rng.integers(-(1 << 20), 1 << 20, size=5000)
    q = Q(8, 6)
    ref = np.clip(np.floor(raw / 2.0 ** (12 - 6) + 0.5), q.min_raw, q.max_raw)
    assert np.array_equal(requantize(raw, 12, q), ref.astype(np.int64))


def test_fitting_and_roundtrip():
    q = Q.fitting(1.3, 8)
    assert q == Q(2, 6)
    x = np.array([-1.3, 0.5, 1.29])
    assert np.abs(dequantize(quantize(x, q), q) - x).max() <= q.lsb / 2
    assert acc_bits(Q(2, 6), Q(4, 12), 16) == 8 + 16 + 4


def test_atomic_write_permissions_and_no_leftovers(tmp_path):
    import os

    from hwcosim.models.atomic import atomic_path, write_text

    write_text(tmp_path / "a.txt", "x")
    mask = os.umask(0)
    os.umask(mask)
    assert (tmp_path / "a.txt").stat().st_mode & 0o777 == 0o666 & ~mask
    with pytest.raises(RuntimeError):
        with atomic_path(tmp_path / "b.txt") as tmp:
            tmp.write_text("half")
            raise RuntimeError("killed mid-write")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt"]  # no half file, no temp file


def test_save_png_atomic_and_closes_the_figure(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from hwcosim.models.atomic import save_png

    fig, ax = plt.subplots()
    ax.plot([0, 1], [1, 0])
    path = save_png(fig, tmp_path / "sub" / "f.png", dpi=50)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not plt.fignum_exists(fig.number)
    assert sorted(p.name for p in (tmp_path / "sub").iterdir()) == ["f.png"]
