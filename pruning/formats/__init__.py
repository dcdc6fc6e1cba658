"""Storage formats for pruned weights: CSB (:mod:`.csb`, BBS), FSS (:mod:`.fss`), N:M
compressed (:mod:`.nm`), CSR/BSR interoperable with scipy (:mod:`.sparse`), memory images for
RTL (:mod:`.memimage`). Every format is an ``.npz`` of arrays plus a JSON manifest with sha256
checksums, written atomically and validated on reading (:class:`.csb.FormatError`)."""
