"""Formats: FSS, N:M, CSR/BSR and memory images round-trip, match hand-worked layouts, and
refuse corrupt, truncated or mismatched files with FormatError."""

from __future__ import annotations

import hashlib
import json
import shutil

import numpy as np
import pytest
import scipy.sparse as sp
from hwcosim.models.fixedpoint import Q, quantize
from hwcosim.pruning.base import PatternError, get_pattern
from hwcosim.pruning.formats import csb, fss, memimage, nm, sparse
from hwcosim.pruning.formats.csb import FormatError, seal
from hypothesis import given, settings
from hypothesis import strategies as st


def rand(rows, cols, seed=0):
    return np.random.default_rng(seed).standard_normal((rows, cols))


# ---------------------------------------------------------------- memory images


@settings(max_examples=40, deadline=None)
@given(
    words=st.integers(0, 20), lanes=st.integers(1, 9), lane_bits=st.integers(1, 21), seed=st.integers(0, 999)
)
def test_pack_roundtrip_against_python_ints(words, lanes, lane_bits, seed):
    rng = np.random.default_rng(seed)
    lv = rng.integers(0, 1 << lane_bits, size=(words, lanes))
    packed = memimage.pack_words(lv, lane_bits)
    wb = lanes * lane_bits
    # reference: the word as a Python int
    ref = [sum(int(lv[i, j]) << (j * lane_bits) for j in range(lanes)) for i in range(words)]
    assert [int.from_bytes(packed[i].tobytes(), "little") for i in range(words)] == ref
    text = memimage.to_hex(packed, wb)
    assert text == "".join(f"{x:0{-(-wb // 4)}x}\n" for x in ref)
    assert (memimage.from_hex(text, wb, words) == packed).all()
    assert (memimage.from_bin(memimage.to_bin(packed), wb, words) == packed).all()
    assert (memimage.unpack_words(packed, lane_bits, lanes) == lv).all()


def test_hex_matches_csb_writer(tmp_path):
    m = csb.encode(rand(8, 32), banks=4, sparsity=0.75, fmt=Q(2, 6))
    man = csb.save(m, tmp_path, "w")
    lanes = memimage.weight_lanes(m.values, m.indices, 8).reshape(-1, 4)
    packed = memimage.pack_words(lanes, m.fmt.width + m.index_bits)
    assert memimage.to_hex(packed, man["hex"]["word_bits"]) == (tmp_path / "w.hex").read_text()


def test_bin_layout_hand_worked(tmp_path):
    # lanes of 12 bits: value -1 in Q(1,7) = 0xff, index 5 -> lane 0x5ff; second lane value 2 index 1 -> 0x102
    lanes = memimage.weight_lanes(np.array([[-1, 2]]), np.array([[5, 1]]), 8)
    assert lanes.tolist() == [[0x5FF, 0x102]]
    packed = memimage.pack_words(lanes, 12)
    assert memimage.to_bin(packed) == bytes([0xFF, 0x25, 0x10])  # 0x1025ff little-endian
    assert memimage.to_hex(packed, 24) == "1025ff\n"
    memimage.write_image(tmp_path / "x.bin", packed, 24, "bin")
    assert (memimage.read_image(tmp_path / "x.bin", 24, "bin", 1) == packed).all()


@pytest.mark.parametrize(
    "text, msg",
    [
        ("1025ff", "truncated"),
        ("1025f\n", "hex digits"),
        ("1025fg\n", "not hex"),
        ("1025ff\n1025ff\n", "expected 1"),
    ],
)
def test_wrong_hex(text, msg):
    with pytest.raises(FormatError, match=msg):
        memimage.from_hex(text, 24, n_words=1)


def test_wrong_bin_and_high_bits():
    with pytest.raises(FormatError, match="whole number"):
        memimage.from_bin(b"\x00" * 5, 24)
    with pytest.raises(FormatError, match="above bit"):
        memimage.from_bin(b"\xff\xff\xff", 20)
    with pytest.raises(FormatError, match="above bit"):
        memimage.from_hex("fffff\n", 18)


# ---------------------------------------------------------------- FSS


@settings(max_examples=25, deadline=None)
@given(
    gr=st.integers(1, 4),
    gc=st.integers(1, 4),
    rh=st.integers(1, 3),
    rw=st.integers(2, 5),
    data=st.data(),
    seed=st.integers(0, 99),
)
def test_fss_roundtrip(tmp_path_factory, gr, gc, rh, rw, data, seed):
    n = data.draw(st.integers(1, rh * rw))
    w = rand(gr * rh, gc * rw, seed)
    m = fss.encode(w, (rh, rw), n=n, fmt=Q(3, 5))
    mask = get_pattern("fss", region=(rh, rw), n=n).mask(w)
    assert (m.mask() == mask).all()
    assert (m.to_dense_raw() == np.where(mask, quantize(w, Q(3, 5)), 0)).all()
    d = tmp_path_factory.mktemp("fss")
    fss.save(m, d, "w", images=("hex", "bin"))
    back = fss.load(d)
    assert back.region == (rh, rw) and back.fmt == Q(3, 5)
    assert (back.values == m.values).all() and (back.indices == m.indices).all()


def test_fss_hand_worked_layout(tmp_path):
    w = np.array([[0.5, -0.25, 0.0, 0.75], [0.1, 0.0, -1.0, 0.2]])
    m = fss.encode(w, (2, 2), n=2, fmt=Q(2, 6))
    # region (0,0) = [0.5, -0.25, 0.1, 0.0] keeps 0.5 (idx 0) and -0.25 (idx 1)
    # region (0,1) = [0.0, 0.75, -1.0, 0.2] keeps 0.75 (idx 1) and -1.0 (idx 2)
    assert m.indices.tolist() == [[[0, 1], [1, 2]]]
    assert m.values.tolist() == [[[32, -16], [48, -64]]]
    fss.save(m, tmp_path, "h", images=("hex",))
    # index_bits 2, lane 10 bits: region 0: lane0 = 32 | 0<<8 = 0x020, lane1 = (-16 & 0xff) | 1<<8 = 0x1f0
    assert (
        tmp_path / "h.hex"
    ).read_text() == f"{0x020 | 0x1F0 << 10:05x}\n{0x130 | (0xC0 | 2 << 8) << 10:05x}\n"


def test_fss_encode_refuses_unbalanced_mask():
    w = rand(4, 8)
    mask = np.zeros((4, 8), dtype=bool)
    mask[0, 0] = True
    with pytest.raises(PatternError, match="same count"):
        fss.encode(w, (2, 4), mask=mask)


# ---------------------------------------------------------------- N:M


def test_nm_metadata_hand_worked():
    w = np.array([[0.0, 1.0, 2.0, 0.0, 3.0, 4.0, 0.0, 0.0, 0.0, 0.0, 5.0, 6.0, 7.0, 0.0, 0.0, 8.0]])
    m = nm.encode(w, 2, 4, fmt=Q(4, 4))
    assert m.indices[0].tolist() == [[1, 2], [0, 1], [2, 3], [0, 3]]
    # nibbles: (1,2) = 1 | 2<<2 = 0x9, (0,1) = 0x4, (2,3) = 0xE, (0,3) = 0xC -> uint16 LE 0xCE49
    meta = m.metadata()
    assert meta.tolist() == [[0x49, 0xCE]]
    assert int(meta.view("<u2")[0, 0]) == 0xCE49
    assert m.compressed().tolist() == [[16, 32, 48, 64, 80, 96, 112, 128 - 1]]  # 8.0 saturates in Q4.4


@pytest.mark.parametrize("n, m_", [(2, 4), (1, 4), (4, 8), (3, 8), (1, 2), (2, 3)])
def test_nm_roundtrip(tmp_path, n, m_):
    w = rand(6, 4 * m_, n)
    mat = nm.encode(w, n, m_)
    mask = get_pattern("nm", n=n, m=m_).mask(w)
    assert ((mat.to_dense_raw() != 0) <= mask).all()
    assert (mat.to_dense_raw() == np.where(mask, quantize(w, mat.fmt), 0)).all()
    nm.save(mat, tmp_path, "w", images=("bin",))
    back = nm.load(tmp_path / "w.json")
    assert (back.values == mat.values).all() and (back.indices == mat.indices).all()
    bits = (m_ - 1).bit_length()
    assert back.metadata().shape == (6, -(-4 * n * bits // 8))


def test_nm_refuses_non_nm_mask():
    w = rand(2, 8)
    with pytest.raises(PatternError, match="expected exactly 2"):
        nm.encode(w, 2, 4, mask=np.ones((2, 8), dtype=bool))


# ---------------------------------------------------------------- CSR / BSR


def test_csr_matches_scipy_and_keeps_explicit_zeros(tmp_path):
    w = rand(7, 9)
    mask = get_pattern("unstructured", sparsity=0.6).mask(w)
    w[mask.nonzero()[0][0], mask.nonzero()[1][0]] = 0.0  # a kept zero survives
    a = sparse.to_csr(w, mask)
    ref = sp.csr_array(np.where(mask, w, 0))
    assert a.nnz == mask.sum() == ref.nnz + 1
    assert (a.toarray() == ref.toarray()).all()
    dense, m2 = sparse.from_scipy(a)
    assert (m2 == mask).all() and (dense == np.where(mask, w, 0)).all()
    sparse.save(a, tmp_path, "c")
    b, fmt = sparse.load(tmp_path)
    assert fmt is None and (b != a).nnz == 0 and b.nnz == a.nnz
    x = rand(9, 3, 1)
    assert np.allclose(b @ x, np.where(mask, w, 0) @ x)


def test_bsr_roundtrip_quantised(tmp_path):
    w = rand(8, 12)
    mask = get_pattern("block", block=(2, 3), sparsity=0.5).mask(w)
    a = sparse.to_bsr(w, mask, (2, 3))
    assert a.blocksize == (2, 3) and a.nnz == mask.sum()
    assert (a.toarray() == np.where(mask, w, 0)).all()
    sparse.save(a, tmp_path, "b", fmt=Q(3, 5))
    b, fmt = sparse.load(tmp_path / "b.npz")
    assert fmt == Q(3, 5) and b.format == "bsr"
    assert (b.toarray() == np.where(mask, quantize(w, fmt) * fmt.lsb, 0)).all()
    with pytest.raises(PatternError, match="partly"):
        sparse.to_bsr(w, get_pattern("unstructured", sparsity=0.5).mask(w), (2, 3))


# ---------------------------------------------------------------- corruption


def _write_all(d):
    w = rand(8, 16, 3)
    fss.save(fss.encode(w, (2, 4), n=3), d, "f", images=("hex", "bin"))
    nm.save(nm.encode(w, 2, 4), d, "n", images=("hex",))
    sparse.save(sparse.to_csr(w, get_pattern("unstructured", sparsity=0.5).mask(w)), d, "c")
    return {"f": fss.load, "n": nm.load, "c": sparse.load}


def _same(a, b):
    if isinstance(a, tuple):
        return (a[0] != b[0]).nnz == 0 and a[1] == b[1]
    return (a.values == b.values).all() and (a.indices == b.indices).all()


@pytest.mark.parametrize("stem", ["f", "n", "c"])
def test_corrupt_npz_never_loads_wrong_data(tmp_path, stem):
    loaders = _write_all(tmp_path)
    good = loaders[stem](tmp_path / f"{stem}.json")
    raw = (tmp_path / f"{stem}.npz").read_bytes()
    for pos in range(0, len(raw), max(1, len(raw) // 60)):
        bad = bytearray(raw)
        bad[pos] ^= 0x5A
        (tmp_path / f"{stem}.npz").write_bytes(bytes(bad))
        try:
            got = loaders[stem](tmp_path / f"{stem}.json")
        except FormatError:
            continue
        assert _same(got, good), f"byte {pos} flipped and the reader returned different data"
    # a flip inside the array payload itself is always caught (zip CRC / sha256)
    (tmp_path / f"{stem}.npz").write_bytes(raw)
    with np.load(tmp_path / f"{stem}.npz") as z:
        payload = z[z.files[0]].tobytes()
    pos = raw.find(payload[: min(16, len(payload))])
    assert pos > 0
    bad = bytearray(raw)
    bad[pos + 1] ^= 0x01
    (tmp_path / f"{stem}.npz").write_bytes(bytes(bad))
    with pytest.raises(FormatError):
        loaders[stem](tmp_path / f"{stem}.json")


@pytest.mark.parametrize("stem", ["f", "n", "c"])
def test_truncated_npz(tmp_path, stem):
    loaders = _write_all(tmp_path)
    raw = (tmp_path / f"{stem}.npz").read_bytes()
    for cut in (0, 10, len(raw) // 2, len(raw) - 1):
        (tmp_path / f"{stem}.npz").write_bytes(raw[:cut])
        with pytest.raises(FormatError):
            loaders[stem](tmp_path / f"{stem}.json")
    (tmp_path / f"{stem}.npz").unlink()
    with pytest.raises(FormatError, match="missing"):
        loaders[stem](tmp_path / f"{stem}.json")


def test_swapped_manifests(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    fss.save(fss.encode(rand(8, 16, 1), (2, 4), n=3), a, "w")
    fss.save(fss.encode(rand(8, 16, 2), (2, 4), n=3), b, "w")
    shutil.copy(b / "w.json", a / "w.json")  # same shapes, other data
    with pytest.raises(FormatError, match="checksum|sha256"):
        fss.load(a / "w.json")
    fss.save(fss.encode(rand(8, 16, 1), (2, 4), n=2), b, "w")  # other shapes
    shutil.copy(b / "w.json", a / "w.json")
    with pytest.raises(FormatError, match="do not belong together|checksum|sha256"):
        fss.load(a / "w.json")
    # an N:M manifest beside FSS arrays: wrong format
    nm.save(nm.encode(rand(8, 16), 2, 4), b, "w")
    shutil.copy(b / "w.json", a / "w.json")
    with pytest.raises(FormatError, match="not a hwcosim-fss manifest"):
        fss.load(a / "w.json")


def test_manifest_edits(tmp_path):
    fss.save(fss.encode(rand(8, 16, 1), (2, 4), n=3), tmp_path, "w")
    p = tmp_path / "w.json"
    good = json.loads(p.read_text())
    for edit, msg in [
        (lambda m: m.update(version=2), "version"),
        (lambda m: m.pop("region"), "region"),
        (lambda m: m.update(n=2), "n=2"),
        (lambda m: m["arrays"]["values"].update(sha256="0" * 64), "checksum"),
        (lambda m: m["arrays"].pop("indices"), "different exports"),
    ]:
        man = json.loads(json.dumps(good))
        edit(man)
        p.write_text(json.dumps(man))  # an edit by hand: the manifest's own checksum refuses it
        with pytest.raises(FormatError, match=f"edited|{msg}"):
            fss.load(p)
        p.write_text(json.dumps(seal(man)))  # re-sealed (as a buggy exporter would): the deeper checks refuse it
        with pytest.raises(FormatError, match=msg):
            fss.load(p)
    p.write_text("{not json")
    with pytest.raises(FormatError, match="not valid JSON"):
        fss.load(p)
    p.write_text(json.dumps(good)[:-20])
    with pytest.raises(FormatError, match="not valid JSON"):
        fss.load(p)


def test_corrupt_images(tmp_path):
    fss.save(fss.encode(rand(8, 16, 1), (2, 4), n=3), tmp_path, "w", images=("hex", "bin"))
    hexp, binp = tmp_path / "w.hex", tmp_path / "w.bin"
    text, data = hexp.read_text(), binp.read_bytes()
    last = text.index("\n") - 1  # the least significant digit of word 0
    hexp.write_text(text[:last] + ("1" if text[last] != "1" else "2") + text[last + 1 :])
    with pytest.raises(FormatError, match="changed after the export"):  # the image's sha256
        fss.load(tmp_path)
    man = json.loads((tmp_path / "w.json").read_text())  # a consistent manifest for a wrong image:
    man["files"]["hex"]["sha256"] = hashlib.sha256(hexp.read_bytes()).hexdigest()
    (tmp_path / "w.json").write_text(json.dumps(seal(man)))
    with pytest.raises(FormatError, match="disagrees"):  # decoded against the arrays
        fss.load(tmp_path)
    man["files"]["hex"]["sha256"] = hashlib.sha256(text.encode()).hexdigest()
    (tmp_path / "w.json").write_text(json.dumps(seal(man)))
    hexp.write_text(text[: len(text) // 2])
    with pytest.raises(FormatError):
        fss.load(tmp_path)
    hexp.write_text(text)
    binp.write_bytes(data[:-1])
    with pytest.raises(FormatError, match="changed after the export|whole number"):
        fss.load(tmp_path)
    binp.write_bytes(data)
    assert fss.load(tmp_path).n == 3


def test_nm_corrupt_metadata_padding(tmp_path):
    # 3:8 on 8 columns: 3 indices x 3 bits = 9 bits -> 2 bytes, 7 padding bits
    mat = nm.encode(rand(2, 8), 3, 8)
    nm.save(mat, tmp_path, "w", images=())
    man = json.loads((tmp_path / "w.json").read_text())
    meta = mat.metadata()
    meta[0, 1] |= 0x80
    from hwcosim.pruning.formats._bundle import save_bundle

    save_bundle(
        tmp_path,
        "w",
        "hwcosim-nm",
        1,
        {"values": mat.compressed().astype(np.int32), "metadata": meta},
        {k: v for k, v in man.items() if k not in ("format", "version", "arrays", "files")},
    )
    with pytest.raises(FormatError, match="padding"):
        nm.load(tmp_path)


def test_csr_structural_refusals(tmp_path):
    from hwcosim.pruning.formats._bundle import save_bundle

    fields = {"kind": "csr", "shape": [2, 3], "blocksize": [1, 1], "nnz": 2, "value_format": None}
    cases = [
        (
            {"data": np.ones(2), "indices": np.array([0, 5], np.int32), "indptr": np.array([0, 1, 2])},
            "lie in",
        ),
        (
            {"data": np.ones(2), "indices": np.array([2, 1], np.int32), "indptr": np.array([0, 2, 2])},
            "sorted",
        ),
        (
            {"data": np.ones(2), "indices": np.array([0, 1], np.int32), "indptr": np.array([0, 2, 1])},
            "indptr",
        ),
        (
            {"data": np.ones(3), "indices": np.array([0, 1], np.int32), "indptr": np.array([0, 1, 2])},
            "shapes",
        ),
    ]
    for arrays, msg in cases:
        save_bundle(tmp_path, "x", "hwcosim-csr", 1, arrays, fields)
        with pytest.raises(FormatError, match=msg):
            sparse.load(tmp_path / "x.json")


def test_directory_with_two_manifests_is_ambiguous(tmp_path):
    fss.save(fss.encode(rand(4, 8), (1, 4), n=1), tmp_path, "a")
    fss.save(fss.encode(rand(4, 8), (1, 4), n=1), tmp_path, "b")
    with pytest.raises(FormatError, match="exactly one"):
        fss.load(tmp_path)
    with pytest.raises(FormatError, match="no such"):
        fss.load(tmp_path / "zzz.json")
