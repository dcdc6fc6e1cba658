"""Registry entry of the KV-Direct processing pipeline (see :mod:`hwcosim.cosim.designs`)."""

from hwcosim.cosim.registry import Design, DocsEntry
from hwcosim.models.kvdirect.rtl_model import PipelineParams


def _pipeline(p: PipelineParams):
    from hwcosim.hdl.kvdirect import Pipeline

    return Pipeline(p)


DESIGNS = [
    Design(
        name="kvdirect-pipeline", top="kvdirect_pipeline", build=_pipeline,
        default_params=lambda: PipelineParams(memory_bytes=1 << 20, entries=64, rs_slots=1024),
        # the board configuration: a 128 KiB store, so the board top's on-chip memory (its 1,024
        # 512-bit bucket lines) fits the ECP5-85F's block RAM beside the pipeline
        board_params=lambda: PipelineParams(memory_bytes=1 << 17, entries=64, rs_slots=1024),
        description="KV-Direct KV processing pipeline: hash, reservation station with forwarding, "
                    "memory engine (Li et al., SOSP 2017)",
        golden="hwcosim.models.kvdirect.rtl_model:golden_run", testbench="hwcosim.cosim.designs.kvdirect.tb_pipeline",
        formal="hwcosim.hdl.kvdirect.pipeline_formal:formal_checks",
        benches=(("kvdirect_rtl", "hwcosim.cosim.designs.kvdirect.pipeline:bench_kvdirect_rtl"),
                 ("kvdirect_resources", "hwcosim.cosim.designs.kvdirect.pipeline:bench_kvdirect_resources")),
        sweep="hwcosim.cosim.designs.kvdirect.sweep:ADAPTER",
        recheck="hwcosim.cosim.designs.kvdirect.bridge:recheck",  # run folders of hwcosim cosim kv and board run --sim
        # the pipeline + an on-chip memory behind the generic stream host (hdl/kvdirect/board.py)
        board_tops=(("uart", "hwcosim.hdl.kvdirect.board:board_top", "hwcosim.cosim.designs.kvdirect.board"),),
        contract="hwcosim.cosim.designs.kvdirect.contract:PIPELINE",
        docs=DocsEntry("kvdirect", "KV-Direct key-value store",
                       "Li et al., \"KV-Direct: High-Performance In-Memory Key-Value Store with Programmable "
                       "NIC\", SOSP 2017")),
]
