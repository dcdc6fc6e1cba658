"""The KV-Direct board top end to end: the host session of ``hwcosim board run kvdirect-pipeline``
drives the pipeline and its on-chip memory behind the generic stream host (UART -> bridge -> request
FIFO -> pipeline <-> memory, responses -> FIFO -> bridge -> UART) with a Zipf operation stream
(chains, forwarding, atomics); every response, matched to its request by tag, is compared with the
golden store. Plus the host side's checks."""

import numpy as np
import pytest
from hwcosim.cosim.designs.kvdirect.board import compare, in_request_order
from hwcosim.models.kvdirect.rtl_model import PipelineParams, golden_run, make_stream, pack_request, pack_response

P = PipelineParams(memory_bytes=8192, entries=16, rs_slots=64)


def _reqs(n=120, seed=4):
    return [pack_request(r) for r in make_stream(n, 24, "zipf", seed)]


@pytest.mark.sim
def test_kvdirect_board_session_through_uart_matches_golden(tmp_path, run_folder_checks):
    from hwcosim.cosim.designs.kvdirect.board import run_board_sim

    reqs = _reqs()
    res = run_board_sim(P, reqs, rate_error=0.02, test_dir=tmp_path)
    mt = res.metrics
    assert res.passed, res.log
    assert mt["mismatches"] == 0 and mt["problems"] == [] and mt["words"] == len(reqs)
    c = mt["counters"]
    assert c["OPS_IN"] == c["OPS_OUT"] == len(reqs) and c["CHAINED"] > 0 and c["FORWARDED"] > 0
    assert c["MEM_READS"] > 0 and c["MEM_WRITES"] > 0
    run_folder_checks(tmp_path, "kvdirect-pipeline", "rtl", index=7)


def test_compare_matches_by_tag_and_catches_errors():
    reqs = _reqs(40)
    from hwcosim.models.kvdirect.rtl_model import unpack_request

    want = [pack_response(r) for r in golden_run(P, [unpack_request(w) for w in reqs])[0]]
    c = {"OPS_IN": 40, "OPS_OUT": 40, "CYCLES": 1}
    shuffled = list(want)
    shuffled[3], shuffled[4] = shuffled[4], shuffled[3]          # out of order: matched by tag
    assert compare(P, reqs, {"responses": shuffled, "counters": c})["problems"] == []
    bad = list(want)
    bad[5] ^= 1 << 12
    s = compare(P, reqs, {"responses": bad, "counters": c})
    assert s["mismatches"] == 1 and "(5," in s["problems"][0]
    s = compare(P, reqs, {"responses": want[:-1], "counters": c})
    assert "1 of 40 requests got no response" in s["problems"][0]
    ordered, problems = in_request_order(reqs[:2], [want[0], want[0] ^ 0x7F])
    assert ordered[0] == want[0] and problems and "no outstanding request" in problems[0]


def test_core_refuses_too_many_entries():
    from hwcosim.hdl.kvdirect.board import KVBoardCore

    with pytest.raises(ValueError, match="tags would repeat"):
        KVBoardCore(PipelineParams(memory_bytes=8192, entries=256, rs_slots=64))
    assert np.all(np.array([int(r).bit_length() for r in _reqs(10)]) <= 156)
