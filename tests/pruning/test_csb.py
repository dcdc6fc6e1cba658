import json

import numpy as np
import pytest
from hwcosim.models.fixedpoint import Q, dequantize, quantize
from hwcosim.pruning.base import PatternError
from hwcosim.pruning.formats import csb
from hwcosim.pruning.patterns.bank_balanced import BankBalanced


def _matrix(seed=0, rows=6, cols=32):
    return np.random.default_rng(seed).normal(0, 0.5, size=(rows, cols))


def test_encode_layout_hand_worked():
    w = np.array([[0.0, 0.5, 0.0, -0.25, 0.75, 0.0, 0.0, 0.125]])
    m = csb.encode(w, banks=2, sparsity=0.5, fmt=Q(2, 6))
    # bank 0 keeps columns 1, 3; bank 1 keeps 4, 7 (slot j = j-th nonzero of every bank)
    assert m.indices.tolist() == [[[1, 0], [3, 3]]]
    assert m.values.tolist() == [[[32, 48], [-16, 8]]]
    # one word per (row, slot); lane b at offset b * (8 + 2): value low, index high
    lane = lambda v, i: (v & 0xFF) | (i << 8)  # noqa: E731
    assert m.words() == [lane(32, 1) | lane(48, 0) << 10, lane(-16, 3) | lane(8, 3) << 10]


def test_roundtrip_dense_matches_pruned_quantised():
    w = _matrix()
    fmt = Q(2, 6)
    m = csb.encode(w, banks=4, sparsity=0.75, fmt=fmt)
    mask = BankBalanced(4, 0.75).mask(w)
    assert np.array_equal(m.to_dense_raw(), np.where(mask, quantize(w, fmt), 0))
    assert np.allclose(m.to_dense(), dequantize(m.to_dense_raw(), fmt))


def test_save_load_exact(tmp_path):
    m = csb.encode(_matrix(1), banks=8, sparsity=0.5)
    man = csb.save(m, tmp_path, stem="lstm_w")
    assert {p.name for p in tmp_path.iterdir()} == {"lstm_w.npz", "lstm_w.json", "lstm_w.hex"}
    back = csb.load(tmp_path / "lstm_w.json")
    assert np.array_equal(back.values, m.values) and np.array_equal(back.indices, m.indices)
    assert back.fmt == m.fmt and back.shape == m.shape and man["k"] == m.k
    hex_words = [int(line, 16) for line in (tmp_path / "lstm_w.hex").read_text().split()]
    assert hex_words == m.words()
    assert csb.load(tmp_path).k == m.k  # a folder with one manifest


def test_corrupt_files_are_refused(tmp_path):
    m = csb.encode(_matrix(2), banks=4, sparsity=0.5)
    csb.save(m, tmp_path)
    npz = tmp_path / "weights.npz"
    good = npz.read_bytes()
    npz.write_bytes(good[: len(good) // 2])
    with pytest.raises(csb.FormatError, match="corrupt or truncated"):
        csb.load(tmp_path / "weights.json")
    # a different matrix's arrays under this manifest
    other = csb.encode(_matrix(3), banks=4, sparsity=0.5)
    csb.save(other, tmp_path / "o")
    npz.write_bytes((tmp_path / "o" / "weights.npz").read_bytes())
    with pytest.raises(csb.FormatError, match="checksum"):
        csb.load(tmp_path / "weights.json")
    npz.write_bytes(good)
    man = json.loads((tmp_path / "weights.json").read_text())
    man["version"] = 99
    (tmp_path / "weights.json").write_text(json.dumps(man))
    with pytest.raises(csb.FormatError, match="version"):
        csb.load(tmp_path / "weights.json")
    (tmp_path / "weights.json").write_text("{not json")
    with pytest.raises(csb.FormatError, match="not valid JSON"):
        csb.load(tmp_path / "weights.json")
    with pytest.raises(csb.FormatError, match="no such CSB manifest"):
        csb.load(tmp_path / "missing.json")


def test_invalid_arrays_and_masks():
    m = csb.encode(_matrix(4), banks=4, sparsity=0.5)
    bad = m.indices.copy()
    bad[0, 0, 0] = 99
    with pytest.raises(csb.FormatError, match="indices must lie"):
        csb.CSBMatrix(m.shape, m.banks, m.fmt, m.values, bad)
    with pytest.raises(PatternError, match="not bank-balanced"):
        w = _matrix(5)
        mask = np.ones_like(w, dtype=bool)
        mask[0, 0] = False
        csb.encode(w, banks=4, mask=mask)


def test_integrity_covers_the_hex_image_and_every_manifest_field(tmp_path):
    """A one-byte edit of the $readmemh image (what the FPGA loads) and an edit of the manifest's
    shape used to load cleanly (the sha256 covered the .npz only)."""
    import json

    import numpy as np
    import pytest
    from hwcosim.pruning.formats import csb
    from hwcosim.pruning.formats.csb import FormatError

    m = csb.encode(np.random.default_rng(1).normal(size=(8, 16)), 4, 0.5)
    csb.save(m, tmp_path, "w")
    hexp, man = tmp_path / "w.hex", tmp_path / "w.json"
    text, good = hexp.read_text(), man.read_text()
    hexp.write_text(("0" if text[0] != "0" else "1") + text[1:])
    with pytest.raises(FormatError, match="readmemh image does not match"):
        csb.load(tmp_path)
    hexp.write_text(text)
    edited = json.loads(good)
    edited["shape"] = [8, 32]
    man.write_text(json.dumps(edited))
    with pytest.raises(FormatError, match="edited after the export"):
        csb.load(tmp_path)
    hexp.unlink()
    man.write_text(good)
    with pytest.raises(FormatError, match="missing"):
        csb.load(tmp_path)
    hexp.write_text(text)
    assert csb.load(tmp_path).shape == (8, 16)
